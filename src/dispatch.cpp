// SPDX-License-Identifier: MIT
// libgk.so itself: runtime SIMD dispatch. The CPU kernels live in one module per target
// (libgk-scalar.so for x86-64-v2, libgk-avx2.so, libgk-avx512.so; see c_api.cpp for why
// they are separate links). On the first call this file picks the best target the CPU can
// run, or the one GK_TARGET names (read once), opens that module RTLD_LOCAL from gk/ next
// to libgk.so (installed) or from libgk.so's own folder (build tree), and every exported
// gk_* function forwards to the module's table. This file is compiled for the baseline and
// contains no kernel: it runs on any x86-64 CPU and says what is missing where a module
// cannot run, instead of dying on an illegal instruction.
#define GK_BUILDING_LIB 1
#include "c_api_table.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "gk/simd/target.hpp"

namespace {

struct target_entry {
  const char* name;
  bool (*runnable)(std::string& missing);  // false: `missing` names the absent features
};

#if defined(__x86_64__)
bool need(std::string& missing, bool ok, const char* feature) {
  if (!ok) missing += missing.empty() ? feature : std::string(", ") + feature;
  return ok;
}
// What -march=x86-64-v2 lets the compiler use (the scalar module's baseline).
bool runs_v2(std::string& m) {
  bool ok = need(m, __builtin_cpu_supports("sse4.2"), "sse4.2");
  ok &= need(m, __builtin_cpu_supports("sse4.1"), "sse4.1");
  ok &= need(m, __builtin_cpu_supports("ssse3"), "ssse3");
  ok &= need(m, __builtin_cpu_supports("popcnt"), "popcnt");
  return ok;
}
// meson's flags for each module are these features exactly (simd/target.hpp's tags).
bool runs_avx2(std::string& m) {
  bool ok = runs_v2(m);
  return need(m, gk::simd::avx2::available(), "avx2+fma+f16c") && ok;
}
bool runs_avx512(std::string& m) {
  bool ok = runs_avx2(m);
  return need(m, gk::simd::avx512::available(), "avx512f/bw/vl/dq+avx512vnni") && ok;
}
// Best first.
const target_entry targets[] = {{"avx512", runs_avx512}, {"avx2", runs_avx2}, {"scalar", runs_v2}};
#elif defined(__aarch64__)
bool runs_always(std::string&) { return true; }
const target_entry targets[] = {{"neon", runs_always}};
#else
bool runs_always(std::string&) { return true; }
const target_entry targets[] = {{"scalar", runs_always}};
#endif

std::string target_list() {
  std::string s;
  for (const auto& t : targets) s += (s.empty() ? "" : ", ") + std::string(t.name);
  return s;
}

// The folder libgk.so was loaded from.
std::string own_dir() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&own_dir), &info) || !info.dli_fname) return ".";
  std::string p = info.dli_fname;
  const auto slash = p.rfind('/');
  return slash == std::string::npos ? "." : p.substr(0, slash);
}

// Where the module of `target` may be: gk/ next to libgk.so (installed), then beside it
// (the build tree).
std::vector<std::string> module_paths(const char* target) {
  const std::string dir = own_dir();
  const std::string file = "libgk-" + std::string(target) + ".so";
  return {dir + "/gk/" + file, dir + "/" + file};
}

// Opens the module of `target`; null with `why` set when it is missing or not ours.
const gk_module_table* open_module(const char* target, std::string& why) {
  std::string tried;
  for (const std::string& path : module_paths(target)) {
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = dlerror();
      tried += "\n  " + path + ": " + (e ? e : "cannot open");
      continue;
    }
    auto entry = reinterpret_cast<gk_module_entry_fn>(dlsym(h, GK_MODULE_ENTRY));
    const gk_module_table* t = entry ? entry() : nullptr;
    if (!t || t->abi != GK_MODULE_ABI || t->size != sizeof(gk_module_table) || std::strcmp(t->target, target) != 0) {
      tried += "\n  " + path + ": not a gk " + target + " module of this build (stale install?)";
      dlclose(h);
      continue;
    }
    return t;  // never closed: its threads and thread-locals live as long as the process
  }
  why = "gk: no module for target " + std::string(target) + " found next to libgk.so:" + tried;
  return nullptr;
}

struct loaded {
  const gk_module_table* table = nullptr;
  std::string error;  // why there is no table
};

loaded load() noexcept {
  loaded r;
  try {
    const char* forced = std::getenv("GK_TARGET");
    if (forced && *forced) {
      const target_entry* e = nullptr;
      for (const auto& t : targets)
        if (std::strcmp(t.name, forced) == 0) e = &t;
      if (!e) {
        r.error = "gk: GK_TARGET=" + std::string(forced) + " is not a target of this build (" + target_list() + ")";
        return r;
      }
      std::string missing;
      if (!e->runnable(missing)) {
        r.error = "gk: GK_TARGET=" + std::string(forced) + " forces a target this CPU cannot run (it lacks " + missing +
                  "); unset GK_TARGET to pick the best one it can";
        return r;
      }
      r.table = open_module(e->name, r.error);
      return r;
    }
    std::string notes;
    for (const auto& t : targets) {
      std::string missing, why;
      if (!t.runnable(missing)) {
        notes += "\n  " + std::string(t.name) + ": this CPU lacks " + missing;
        continue;
      }
      if ((r.table = open_module(t.name, why))) return r;
      notes += "\n  " + why;
    }
    r.error = "gk: no target module can run on this CPU:" + notes;
  } catch (...) {
    r.error = "gk: out of memory while loading a target module";
  }
  return r;
}

const loaded& state() noexcept {
  static const loaded s = load();
  return s;
}
const gk_module_table* module() noexcept { return state().table; }

}  // namespace

extern "C" {

GK_API int gk_init(void) { return module() ? 0 : 1; }

GK_API const char* gk_simd_target(void) {
  const gk_module_table* t = module();
  return t ? t->target : nullptr;
}

GK_API int gk_simd_target_supported(const char* target) {
  if (!target) return 0;
  for (const auto& t : targets) {
    if (std::strcmp(t.name, target) != 0) continue;
    std::string missing;
    if (!t.runnable(missing)) return 0;
    for (const std::string& path : module_paths(t.name))
      if (access(path.c_str(), R_OK) == 0) return 1;
    return 0;
  }
  return 0;
}

GK_API const char* gk_last_error(void) {
  const gk_module_table* t = module();
  return t ? t->last_error() : state().error.c_str();
}

// (the table is module()->, never a local: a local would shadow a parameter named t)
#define GK_FN(ret, name, params, args, fail)      \
  GK_API ret gk_##name params {                   \
    if (module()) return module()->name args;     \
    return fail;                                  \
  }
#define GK_OP(name, params, args)                 \
  GK_API gk_tensor* gk_##name params {            \
    if (module()) return module()->name args;     \
    return nullptr;                               \
  }
#include "c_api_entries.inc"
#undef GK_FN
#undef GK_OP

}  // extern "C"
