// SPDX-License-Identifier: MIT
// The device registry: one entry per device found at start-up, the CPU always first.
// Device backends add a discoverer (register_discoverer) that returns the devices it
// finds; a discoverer that throws or finds nothing is not an error, the devices are just
// not there. The first time anything asks for the list, one banner line per device goes
// to stderr — name, memory, device_features (the SIMD path the CPU kernels were compiled
// for; for a GPU the architectures built for) — so a log always says what ran where.
// GK_QUIET=1, read once, turns the banner off.
//
// registry is a class so tests can make their own with a captured printer; devices() is
// the process-wide one.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "gk/backend.hpp"
#include "gk/backends/cpu.hpp"
#include "gk/simd/target.hpp"

#ifdef GK_WITH_CUDA
#include "gk/backends/cuda.hpp"
#endif

namespace gk {

enum class device_type { cpu, gpu };

struct device_info {
  std::string name;
  std::string description;
  std::uint64_t memory_total = 0;  // bytes
  std::uint64_t memory_free = 0;   // bytes, at discovery
  device_type type = device_type::cpu;
  std::string device_features;
  std::function<std::unique_ptr<backend>()> make_backend;  // a backend on this device
};

namespace registry_detail {

// "MemTotal:  24683620 kB" -> bytes; 0 if the key is missing (not Linux, no /proc).
inline std::uint64_t meminfo_bytes(std::string_view key) {
  std::ifstream f("/proc/meminfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.compare(0, key.size(), key) != 0 || line.size() <= key.size() || line[key.size()] != ':') continue;
    std::istringstream in(line.substr(key.size() + 1));
    std::uint64_t kib = 0;
    in >> kib;
    return kib * 1024;
  }
  return 0;
}

inline std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    auto colon = line.find(':');
    if (colon == std::string::npos) break;
    auto start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? std::string() : line.substr(start);
  }
  return "unknown CPU";
}

inline device_info cpu_device() {
  device_info d;
  d.name = "CPU";
  d.description = cpu_model() + ", " + std::to_string(std::thread::hardware_concurrency()) + " threads";
  d.memory_total = meminfo_bytes("MemTotal");
  d.memory_free = meminfo_bytes("MemAvailable");
  d.type = device_type::cpu;
  // what the kernels in this build were compiled for; a build for a target this CPU
  // cannot run says so here rather than dying on the first illegal instruction unexplained
  d.device_features = "simd " + std::string(simd::native::name);
  if (!simd::native::available()) d.device_features += " (not runnable on this CPU)";
  d.make_backend = [] { return std::make_unique<cpu_backend>(); };
  return d;
}

inline std::string gib(std::uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

}  // namespace registry_detail

// GK_QUIET=1 in the environment now (devices() reads it once, at its first call).
inline bool env_quiet() {
  const char* v = std::getenv("GK_QUIET");
  return v && v[0] && !(v[0] == '0' && v[1] == 0);
}

// "gk: CPU (AMD EPYC, 2 threads): 23.5 GiB, 22.7 GiB free; simd avx512"
inline std::string banner_line(const device_info& d) {
  return "gk: " + d.name + " (" + d.description + "): " + registry_detail::gib(d.memory_total) + ", " +
         registry_detail::gib(d.memory_free) + " free; " + d.device_features;
}

class registry {
 public:
  using discoverer = std::function<std::vector<device_info>()>;
  using printer = std::function<void(const std::string& line)>;

  // print gets one banner line per device, the first time devices() is called, unless quiet.
  registry(printer print, bool quiet, std::vector<discoverer> discoverers = {})
      : print_(std::move(print)), quiet_(quiet), discoverers_(std::move(discoverers)) {}

  const std::vector<device_info>& devices() {
    std::call_once(once_, [this] {
      devices_.push_back(registry_detail::cpu_device());
      for (auto& find : discoverers_) {
        try {
          for (auto& d : find()) devices_.push_back(std::move(d));
        } catch (...) {
          // a driver that is missing or refuses is the normal case on a machine without that device
        }
      }
      if (!quiet_ && print_)
        for (const auto& d : devices_) print_(banner_line(d));
    });
    return devices_;
  }

 private:
  printer print_;
  bool quiet_;
  std::vector<discoverer> discoverers_;
  std::once_flag once_;
  std::vector<device_info> devices_;
};

// Device backends call this from a static initialiser, before anything asks for devices();
// one added later is not seen by the process-wide registry.
inline std::vector<registry::discoverer>& discoverers() {
  static std::vector<registry::discoverer> list;
  return list;
}

// The process-wide registry: banner to stderr, GK_QUIET read once.
inline const std::vector<device_info>& devices() {
  static registry r([](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); }, env_quiet(), [] {
    std::vector<registry::discoverer> list = discoverers();
#ifdef GK_WITH_CUDA
    // built with gk_cuda_dep: the CUDA devices (a reference to the compiled part, so a
    // static link keeps it)
    list.push_back([] { return cuda::discover(); });
#endif
    return list;
  }());
  return r.devices();
}

}  // namespace gk
