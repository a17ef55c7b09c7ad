#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs on the GPU machine (the device tool), from the repository root:
#   bash tools/cuda_device.sh test    build gk with CUDA (sm_90), run suite cuda-device and
#                                     the CUDA kernel contract
#   bash tools/cuda_device.sh bench   also build the reference's CUDA backend from the
#                                     source carried in .devcarry/ggml and run benchmarks/cuda
#   bash tools/cuda_device.sh all     both
# GK_REF_BUILD_S bounds the reference's build (seconds); past it the benchmark runs gk alone.
# .devcarry (ignored, carried) holds catch2 and xsimd headers (the GPU machine has no
# Debian packages) and, for bench, the reference's ggml folder. Logs go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
mode="${1:-all}"
OUT="${OUT:-/tmp/gk-out}"
mkdir -p "$OUT"
root="$(pwd)"
export CPLUS_INCLUDE_PATH="$root/.devcarry/include${CPLUS_INCLUDE_PATH:+:$CPLUS_INCLUDE_PATH}"
export PATH="/usr/local/cuda/bin:$PATH"
meson() { if command -v meson >/dev/null; then command meson "$@"; else python3 -m mesonbuild.mesonmain "$@"; fi; }
jobs="$(nproc)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true

refpid=""
refprefix=/tmp/refcuda-prefix
if [[ -f .devcarry/refcuda.tar.part-aa ]]; then
  # a reference build an earlier call brought back (split into files the tool returns)
  mkdir -p "$refprefix" && cat .devcarry/refcuda.tar.part-* | tar -x -C "$refprefix"
elif [[ "$mode" != test || -n "${GK_BUILD_REF:-}" ]] && [[ -d .devcarry/ggml ]]; then
  # ggml configured on its own wants its pkg-config template, which the package lacks
  [[ -f .devcarry/ggml/ggml.pc.in ]] || : >.devcarry/ggml/ggml.pc.in
  (cmake -S .devcarry/ggml -B /tmp/refcuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_CUDA_FA=OFF -DGGML_NATIVE=OFF -DGGML_CUDA_NCCL=OFF \
      -DBUILD_SHARED_LIBS=ON -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF \
      -DCMAKE_INSTALL_PREFIX=/tmp/refcuda-prefix &&
    timeout "${GK_REF_BUILD_S:-3000}" cmake --build /tmp/refcuda -j "$((jobs * 3 / 4))" && cmake --install /tmp/refcuda &&
    (cd "$refprefix" && tar -c lib include | split -b 15M - "$OUT/refcuda.tar.part-")) >"$OUT/ref-build.log" 2>&1 &
  refpid=$!
fi

b=/tmp/gk-cuda
t0=$(date +%s)
meson setup "$b" -Dcuda=enabled -Dcuda-architectures=90 -Dtests=true >"$OUT/setup.log" 2>&1 || { tail -30 "$OUT/setup.log"; exit 1; }
targets=$(cd "$b" && ninja -t targets all 2>/dev/null | grep -oE '^(tests/cuda/test_[a-z0-9_]+|tests/contract/[a-z0-9_-]+|benchmarks/cuda/bench_cuda): ' | tr -d ': ' | sort -u)
echo "building: $targets"
ninja -C "$b" -j "$jobs" $targets >"$OUT/build.log" 2>&1 || { grep -E "error|FAILED" "$OUT/build.log" | head -40; }
echo "gk build: $(( $(date +%s) - t0 )) s"

rc=0
if [[ "$mode" == test || "$mode" == all ]]; then
  for exe in "$b"/tests/cuda/test_cuda_*; do
    [[ -f "$exe" && -x "$exe" ]] || continue
    n=$(basename "$exe")
    s=$(date +%s)
    GK_QUIET=1 timeout 300 "$exe" >"$OUT/$n.log" 2>&1
    r=$?
    ((r)) && rc=1
    echo "$n: rc $r, $(( $(date +%s) - s )) s: $(grep -E '^(All tests passed|test cases:)' "$OUT/$n.log" | tail -1)"
    ((r)) && grep -B3 -A12 -E "FAILED|failed|REQUIRE|CHECK" "$OUT/$n.log" | head -60
  done
  for exe in "$b"/tests/contract/gk-contract-cuda; do
    [[ -x "$exe" ]] || continue
    GK_QUIET=1 timeout 300 "$exe" >"$OUT/contract-cuda.log" 2>&1
    echo "gk-contract-cuda: rc $?"; grep SUMMARY "$OUT/contract-cuda.log"
  done
fi

if [[ -n "$refpid" ]]; then
  wait "$refpid"
  echo "reference CUDA build: rc $?"
  tail -3 "$OUT/ref-build.log"
fi
if [[ "$mode" != test ]]; then
  if [[ -f "$refprefix/lib/libggml-cuda.so" ]]; then
    meson configure "$b" -Dreference-cuda="$refprefix" >/dev/null && ninja -C "$b" benchmarks/cuda/bench_cuda >>"$OUT/build.log" 2>&1
  fi
  LD_LIBRARY_PATH="$refprefix/lib":${LD_LIBRARY_PATH:-} GK_QUIET=1 timeout 400 "$b/benchmarks/cuda/bench_cuda" 2>&1 | tee "$OUT/bench_cuda.txt"
fi
# the tool returns at most 8 files: the logs go back as one archive
(cd "$OUT" && tar -czf logs.tar.gz ./*.log && rm -f ./*.log)
exit $rc
