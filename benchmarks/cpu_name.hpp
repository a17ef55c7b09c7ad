// SPDX-License-Identifier: MIT
// The CPU's model name, for the first line of every benchmark's output.
#pragma once

#include <fstream>
#include <string>

namespace gk_bench {

inline std::string cpu_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      auto p = line.find(':');
      return p == std::string::npos ? line : line.substr(p + 2);
    }
  return "unknown CPU";
}

}  // namespace gk_bench
