#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The target modules cannot share code: each exports exactly one symbol (its table; every
# inline function and template instance is local, so none can be bound across targets),
# and no module holds an instruction of a wider target than its own: no ymm register in
# libgk-scalar.so, no zmm register in libgk-avx2.so. That is what an ODR merge of an
# AVX-512 copy into a lower target would leave behind. libgk.so itself exports gk_* only.
# The control: the same count must find AVX-512 code in libgk-avx512.so.
#   modules_isolated.sh BUILD_DIR
set -euo pipefail
dir=$1
fail=0
check_exports() {  # file, expected count, grep pattern every export must match
  local n bad
  n=$(nm -D --defined-only "$1" | wc -l)
  bad=$(nm -D --defined-only "$1" | awk '{print $3}' | grep -vE "$3" || true)
  echo "$(basename "$1"): $n exported symbols"
  if [[ -n $2 && $n != "$2" ]] || [[ -n $bad ]]; then echo "  unexpected exports: ${bad:-count $n}"; fail=1; fi
}
count() { objdump -d --no-show-raw-insn "$1" | grep -cE "%$2" || true; }
check_exports "$dir/libgk.so" "" '^gk_'
for m in scalar avx2 avx512; do
  f=$dir/libgk-$m.so
  [[ -e $f ]] || continue
  check_exports "$f" 1 '^gk_module_table_v1$'
  ymm=$(count "$f" ymm) zmm=$(count "$f" zmm)
  echo "  $ymm instructions on ymm, $zmm on zmm"
  case $m in
    scalar) (( ymm == 0 && zmm == 0 )) || { echo "  the scalar module holds AVX code"; fail=1; } ;;
    avx2) (( zmm == 0 && ymm > 0 )) || { echo "  the avx2 module holds AVX-512 code (or no AVX2 code)"; fail=1; } ;;
    avx512) (( zmm > 0 )) || { echo "  the avx512 module holds no AVX-512 code"; fail=1; } ;;
  esac
done
exit $fail
