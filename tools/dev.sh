#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The README's two commands:
#   bash tools/dev.sh demo   install what is missing, build, run examples/gk-demo
#   bash tools/dev.sh test   install what is missing, build, run the whole test suite
# Missing Debian packages are installed with apt-get (as root; otherwise the script says
# what to install). The reference is built once into a cache by tools/reference.sh and
# the tests that compare with it are always built. GK_BUILD_DIR picks the build folder.
# The aarch64 cross compiler and qemu-user run the NEON kernels' tests on x86 (suite neon).
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-}"
[[ "$mode" == demo || "$mode" == test ]] || { echo "usage: bash tools/dev.sh demo|test" >&2; exit 2; }
build="${GK_BUILD_DIR:-build}"

# Tools count as present when their command is on PATH (however they were installed);
# libraries when their Debian package is.
missing=()
declare -A tool_pkg=([g++]=g++ [meson]=meson [ninja]=ninja-build [pkg-config]=pkg-config
                     [cmake]=cmake [git]=git [npm]=npm [python3]=python3
                     [aarch64-linux-gnu-g++]=g++-aarch64-linux-gnu [qemu-aarch64]=qemu-user)
for cmd in "${!tool_pkg[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${tool_pkg[$cmd]}")
done
for p in catch2 libxsimd-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "dev.sh: missing packages: ${missing[*]} (run as root, or apt-get install them)" >&2
    exit 1
  fi
  echo "dev.sh: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

ref="$(tools/reference.sh)"
opts=(-Dreference="$ref")
# GK_CUDA_ARCHS (e.g. "90") narrows the CUDA architectures compiled (-Dcuda-architectures)
[[ -n "${GK_CUDA_ARCHS:-}" ]] && opts+=(-Dcuda-architectures="$GK_CUDA_ARCHS")
if [[ ! -f "$build/build.ninja" ]]; then
  meson setup "$build" "${opts[@]}" >/dev/null
else
  meson configure "$build" "${opts[@]}" >/dev/null
fi

jobs="$(nproc 2>/dev/null || echo 2)"
if [[ "$mode" == demo ]]; then
  ninja -C "$build" -j "$jobs" examples/gk-demo >/dev/null
  exec "$build/examples/gk-demo"
fi
ninja -C "$build" -j "$jobs"
meson test -C "$build" --print-errorlogs --num-processes "$jobs" --no-suite cuda-device
