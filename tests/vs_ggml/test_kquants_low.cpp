// SPDX-License-Identifier: MIT
// q2_K, q3_K against the reference.
#include "formats_main.hpp"

GK_FORMAT_CASE(q2_K)
GK_FORMAT_CASE(q3_K)

GK_CONTROL_DECODER(q2_K)
GK_CONTROL_DECODER(q3_K)
GK_CONTROL_ENCODER(q3_K)
GK_CONTROL_DOT(q2_K)
