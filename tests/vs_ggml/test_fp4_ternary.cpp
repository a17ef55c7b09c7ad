// SPDX-License-Identifier: MIT
// mxfp4, nvfp4, tq1_0, tq2_0 against the reference.
#include "formats_main.hpp"

GK_FORMAT_CASE(mxfp4)
GK_FORMAT_CASE(nvfp4)
GK_FORMAT_CASE(tq1_0)
GK_FORMAT_CASE(tq2_0)

GK_CONTROL_DECODER(nvfp4)
GK_CONTROL_DECODER(tq1_0)
GK_CONTROL_ENCODER(mxfp4)
GK_CONTROL_DOT(nvfp4)
