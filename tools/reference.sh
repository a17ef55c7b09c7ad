#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Obtains the reference (ggml inside llama.cpp v0.4.0, carried by the npm package
# node-llama-cpp@3.21.1 as llama/gitRelease.bundle), builds ggml's base and CPU
# libraries as llama.cpp builds them by default (static, Release, native, llamafile on)
# into a cache folder outside the checkout, and prints the prefix to pass to
# `meson setup -Dreference=PREFIX`. A second run finds the cache and takes seconds.
#
#   tools/reference.sh            build if needed, print the prefix on stdout
#   GK_REFERENCE_CACHE=DIR        where the cache lives (default ~/.cache/gk-reference)
#
# Nothing of the reference is ever written into the checkout.
set -euo pipefail

pkg="node-llama-cpp@3.21.1"
cache="${GK_REFERENCE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gk-reference}"
prefix="$cache/prefix"
stamp="$prefix/.complete-v1"

log() { echo "reference.sh: $*" >&2; }

if [[ -f "$stamp" ]]; then
  echo "$prefix"
  exit 0
fi

for tool in npm git cmake tar; do
  command -v "$tool" >/dev/null || { log "needs '$tool' on PATH"; exit 1; }
done

mkdir -p "$cache"
cd "$cache"

if [[ ! -d src/.git ]]; then
  log "fetching $pkg"
  rm -rf npm src
  mkdir -p npm
  (cd npm && npm pack --silent "$pkg" >/dev/null)
  tar -xzf npm/*.tgz -C npm package/llama/gitRelease.bundle package/llama/llama.cpp.info.json
  git -c advice.detachedHead=false clone --quiet npm/package/llama/gitRelease.bundle src
  log "llama.cpp $(sed -n 's/.*"tag": *"\([^"]*\)".*/\1/p' npm/package/llama/llama.cpp.info.json)"
fi

# ggml's own CMakeLists expects files (ggml.pc.in) that only its home repository has
# when built top-level; as a subproject of a tiny wrapper it builds cleanly.
mkdir -p wrap
cat > wrap/CMakeLists.txt <<CMAKE
cmake_minimum_required(VERSION 3.14)
project(gk_reference C CXX)
add_subdirectory("$cache/src/ggml" ggml)
CMAKE

jobs=$(nproc 2>/dev/null || echo 2)
log "building ggml-base and ggml-cpu (static, Release, native, llamafile) with $jobs jobs"
cmake -S wrap -B build -G "$(command -v ninja >/dev/null && echo Ninja || echo 'Unix Makefiles')" \
  -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
  -DGGML_NATIVE=ON -DGGML_LLAMAFILE=ON -DGGML_OPENMP=ON \
  -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF >build.log 2>&1 \
  || { tail -30 build.log >&2; exit 1; }
cmake --build build --target ggml-base ggml-cpu ggml -j "$jobs" >>build.log 2>&1 \
  || { tail -30 build.log >&2; exit 1; }

rm -rf "$prefix"
mkdir -p "$prefix/lib" "$prefix/include" "$prefix/include-internal"
find build -name 'libggml*.a' -exec cp {} "$prefix/lib/" \;
cp src/ggml/include/*.h "$prefix/include/"
# Internal headers (block layouts, quantizer prototypes, format tables) for the
# comparison tests and the codebook generator only; gk never includes them.
cp src/ggml/src/ggml-common.h src/ggml/src/ggml-quants.h src/ggml/src/ggml-impl.h "$prefix/include-internal/"
mkdir -p "$prefix/include-internal/ggml-cpu"
cp src/ggml/src/ggml-cpu/*.h "$prefix/include-internal/ggml-cpu/" 2>/dev/null || true
ls "$prefix/lib"/libggml-base.a "$prefix/lib"/libggml-cpu.a >/dev/null
touch "$stamp"
log "ready"
echo "$prefix"
