// SPDX-License-Identifier: MIT
// q4_K, q5_K, q6_K, q8_K against the reference.
#include "formats_main.hpp"

GK_FORMAT_CASE(q4_K)
GK_FORMAT_CASE(q5_K)
GK_FORMAT_CASE(q6_K)
GK_FORMAT_CASE(q8_K)

GK_CONTROL_DECODER(q4_K)
GK_CONTROL_DECODER(q6_K)
GK_CONTROL_ENCODER(q5_K)
GK_CONTROL_DOT(q4_K)
