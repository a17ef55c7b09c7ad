// SPDX-License-Identifier: MIT
// iq2_xxs, iq2_xs and iq2_s against the reference.
#include "gk/formats/iq2.hpp"
#include "formats_main.hpp"

GK_FORMAT_CASE(iq2_xxs)
GK_FORMAT_CASE(iq2_xs)
GK_FORMAT_CASE(iq2_s)

GK_CONTROL_DECODER(iq2_xs)
GK_CONTROL_DOT(iq2_s)
