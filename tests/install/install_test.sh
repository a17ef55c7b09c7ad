#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The installed copy works on its own: installs the build into a temporary DESTDIR, then
# builds a tiny C program (gk.h, libgk.so) and a tiny C++ program (the header-only
# library, plus gk.h) with nothing but `pkg-config --cflags --libs gk` pointed at that
# copy, and runs both from it (LD_LIBRARY_PATH, no rpath into the build tree). The C
# program runs once per SIMD target this CPU has, so the modules under libdir/gk/ load
# from the installed folder.
#   install_test.sh BUILD_DIR C_COMPILER CXX_COMPILER   (a compiler may be "ccache cc")
set -euo pipefail
build=$1 cc=$2 cxx=$3
unset LD_LIBRARY_PATH  # meson points it into the build tree; nothing here may look there
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dest=$tmp/root

meson install -C "$build" --destdir "$dest" --no-rebuild --quiet >/dev/null
pc=$(find "$dest" -name gk.pc | head -1)
[[ -n "$pc" ]] || { echo "install_test: no gk.pc installed"; exit 1; }
export PKG_CONFIG_PATH=$(dirname "$pc") PKG_CONFIG_SYSROOT_DIR=$dest PKG_CONFIG_LIBDIR=
libdir=$(find "$dest" -name 'libgk.so' -printf '%h\n' | head -1)
echo "install_test: installed into $dest; libdir ${libdir#"$dest"}"
ls "$libdir/gk" | sed 's/^/  module: /'
for f in gk/gk.h gk/gk.hpp gk/ops.hpp gk/simd/target.hpp gk/formats/codebooks.inc; do
  [[ -n $(find "$dest" -path "*/include/$f") ]] || { echo "install_test: include/$f not installed"; exit 1; }
done

mkdir "$tmp/proj" && cd "$tmp/proj"
cat > hello.c <<'C'
#include <stdio.h>
#include <gk/gk.h>
int main(void) {
  if (gk_init()) { fprintf(stderr, "%s\n", gk_last_error()); return 1; }
  gk_context *ctx = gk_context_new(1 << 20, false);
  gk_tensor *a = gk_new_tensor_1d(ctx, GK_TYPE_F32, 4), *b = gk_new_tensor_1d(ctx, GK_TYPE_F32, 4);
  const float av[4] = {1, 2, 3, 4}, bv[4] = {10, 20, 30, 40};
  gk_tensor_set_bytes(a, av, 0, sizeof av);
  gk_tensor_set_bytes(b, bv, 0, sizeof bv);
  gk_tensor *y = gk_add(ctx, a, b);
  gk_graph *g = gk_graph_new();
  gk_build_forward_expand(g, y);
  if (gk_graph_compute(g, 2)) { fprintf(stderr, "%s\n", gk_last_error()); return 1; }
  float r[4];
  gk_tensor_get_bytes(y, r, 0, sizeof r);
  printf("c: %s %g %g %g %g\n", gk_simd_target(), r[0], r[1], r[2], r[3]);
  gk_graph_free(g);
  gk_context_free(ctx);
  return r[3] == 44.0f ? 0 : 1;
}
C
cat > hello.cpp <<'CPP'
#include <cstdio>
#include <gk/gk.hpp>
#include <gk/gk.h>
int main() {
  gk::context ctx({1 << 20, nullptr, false});
  gk::tensor* a = ctx.new_tensor_1d(gk::type::f32, 32);
  for (int i = 0; i < 32; ++i) static_cast<float*>(a->data)[i] = static_cast<float>(i);
  gk::tensor* s = gk::sum(ctx, gk::sqr(ctx, a));
  gk::graph g;
  g.build_forward_expand(s);
  gk::cpu::compute(g, 2);
  float v = *static_cast<float*>(s->data);
  std::printf("c++: header-only %s, libgk %s, sum of squares %g\n", std::string(gk::simd::native::name).c_str(),
              gk_simd_target(), v);
  return v == 10416.0f && gk_simd_target() ? 0 : 1;
}
CPP
$cc -std=c11 hello.c -o hello_c $(pkg-config --cflags --libs gk)
$cxx -std=c++20 -O0 hello.cpp -o hello_cpp $(pkg-config --cflags --libs gk) -pthread
# nothing may come from the build tree
for exe in hello_c hello_cpp; do
  if LD_LIBRARY_PATH=$libdir ldd "./$exe" | grep -F "$build" ; then echo "install_test: $exe resolves into the build tree"; exit 1; fi
done
LD_LIBRARY_PATH=$libdir ./hello_c
for t in scalar avx2 avx512; do
  [[ -e $libdir/gk/libgk-$t.so ]] || continue
  if out=$(LD_LIBRARY_PATH=$libdir GK_TARGET=$t ./hello_c 2>&1); then echo "$out"
  elif grep -q "cannot run" <<<"$out"; then echo "c: $t not runnable on this CPU"
  else echo "$out"; exit 1; fi
done
LD_LIBRARY_PATH=$libdir ./hello_cpp
echo "install_test: ok"
