// SPDX-License-Identifier: MIT
// iq3_xxs and iq3_s against the reference.
#include "gk/formats/iq3.hpp"
#include "formats_main.hpp"

GK_FORMAT_CASE(iq3_xxs)
GK_FORMAT_CASE(iq3_s)

GK_CONTROL_DECODER(iq3_xxs)
GK_CONTROL_DOT(iq3_s)
