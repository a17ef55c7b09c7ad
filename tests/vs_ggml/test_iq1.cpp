// SPDX-License-Identifier: MIT
// iq1_s, iq1_m against the reference.
#include "gk/formats/iq1.hpp"
#include "formats_main.hpp"

GK_FORMAT_CASE(iq1_s)
GK_FORMAT_CASE(iq1_m)

GK_CONTROL_DECODER(iq1_m)
GK_CONTROL_DOT(iq1_s)
