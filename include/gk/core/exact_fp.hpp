// SPDX-License-Identifier: MIT
// GK_EXACT_FP_BEGIN / GK_EXACT_FP_END bracket code whose float results are part of a
// definition (decoders must equal the reference bit for bit; scalar dots are what SIMD
// kernels are compared with). Inside, the compiler may not fuse a*b+c into one FMA:
// with -march=native and GCC's default -ffp-contract=fast, `d*q - m` would otherwise
// round once instead of twice and a q4_K decode would differ in the last bit.
// (clang honours this except under an explicit -ffp-contract=fast, which disregards
// pragmas by design; do not build gk with that flag.)
#pragma once

#if defined(__clang__)
#define GK_EXACT_FP_BEGIN _Pragma("float_control(push)") _Pragma("clang fp contract(off)")
#define GK_EXACT_FP_END _Pragma("float_control(pop)")
#elif defined(__GNUC__)
#define GK_EXACT_FP_BEGIN _Pragma("GCC push_options") _Pragma("GCC optimize(\"fp-contract=off\")")
#define GK_EXACT_FP_END _Pragma("GCC pop_options")
#else
#define GK_EXACT_FP_BEGIN
#define GK_EXACT_FP_END
#endif
