// SPDX-License-Identifier: MIT
// The one interface between libgk.so (src/dispatch.cpp, compiled once for the baseline)
// and a target module (src/c_api.cpp, compiled once per SIMD target into its own shared
// object): a table of function pointers, one slot per entry of c_api_entries.inc. The
// module exports a single symbol, GK_MODULE_ENTRY, that returns its table; libgk.so
// checks abi and size before it uses one, so a stale module is refused, not called.
#pragma once

#include <cstdint>

#include "gk/gk.h"

// Bump on any change to c_api_entries.inc or to this struct.
#define GK_MODULE_ABI 1
#define GK_MODULE_ENTRY "gk_module_table_v1"

struct gk_module_table {
  std::uint32_t abi;   // GK_MODULE_ABI
  std::uint32_t size;  // sizeof(gk_module_table)
  const char* target;  // the SIMD target its kernels were compiled for (simd::native::name)
  const char* (*last_error)(void);
#define GK_FN(ret, name, params, args, fail) ret(*name) params;
#define GK_OP(name, params, args) gk_tensor* (*name) params;
#include "c_api_entries.inc"
#undef GK_FN
#undef GK_OP
};

using gk_module_entry_fn = const gk_module_table* (*)();
