// SPDX-License-Identifier: MIT
// iq4_nl, iq4_xs against the reference.
#include "gk/formats/iq4.hpp"
#include "formats_main.hpp"

GK_FORMAT_CASE(iq4_nl)
GK_FORMAT_CASE(iq4_xs)

GK_CONTROL_DECODER(iq4_xs)
GK_CONTROL_DOT(iq4_nl)
