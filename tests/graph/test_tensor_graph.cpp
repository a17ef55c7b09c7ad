// SPDX-License-Identifier: MIT
// Tensors, the context arena, views and graphs, with no compute: geometry, aliasing,
// error messages, and the iterative walk on a million-node chain.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "gk/gk.hpp"

using namespace gk;
using Catch::Matchers::Contains;

TEST_CASE("new tensors get default strides and arena storage", "[tensor]") {
  context ctx({1u << 20});
  tensor* t = ctx.new_tensor_3d(type::q4_0, 64, 3, 2);
  CHECK(t->nb[0] == 18);
  CHECK(t->nb[1] == 36);
  CHECK(t->nb[2] == 108);
  CHECK(t->nb[3] == 216);
  CHECK(t->nbytes() == 216);
  CHECK(t->nrows() == 6);
  CHECK(t->n_dims() == 3);
  CHECK(t->is_contiguous());
  CHECK(reinterpret_cast<std::uintptr_t>(t->data) % context::data_align == 0);
  CHECK_THROWS_WITH(ctx.new_tensor_1d(type::q4_0, 33), Contains("not a multiple of q4_0's block size 32"));
}

TEST_CASE("an exhausted arena names the tensor and the sizes and writes nothing past its end", "[tensor]") {
  std::vector<unsigned char> mem(4096 + 64, 0xAB);
  const std::size_t size = 4096;
  context ctx({size, mem.data(), false});
  ctx.new_tensor_1d(type::f32, 256);  // 1 KiB + header
  const std::size_t used = ctx.used();
  try {
    tensor* a = ctx.new_tensor_1d(type::f32, 1024);
    (void)a;
    FAIL("no error");
  } catch (const gk::error& e) {
    const std::string m = e.what();
    CHECK_THAT(m, Contains("arena exhausted"));
    CHECK_THAT(m, Contains("f32 [1024, 1, 1, 1]"));
    CHECK_THAT(m, Contains("4096"));
  }
  CHECK(ctx.used() == used);
  // an op builder's tensor names the op
  tensor* x = ctx.new_tensor_2d(type::f32, 8, 8);
  tensor* w = ctx.new_tensor_2d(type::f32, 8, 8);
  context small({0});
  CHECK_THROWS_WITH(mul_mat(small, w, x), Contains("for op mul_mat"));
  for (std::size_t i = size; i < mem.size(); ++i) REQUIRE(mem[i] == 0xAB);
}

TEST_CASE("no_alloc contexts plan headers only", "[tensor]") {
  context ctx({64 * context::tensor_overhead(), nullptr, true});
  tensor* t = ctx.new_tensor_2d(type::f32, 4096, 4096);
  CHECK(t->data == nullptr);
  CHECK(t->nbytes() == 4096u * 4096u * 4u);
}

TEST_CASE("views alias their base at build time", "[tensor][view]") {
  context ctx({1u << 20});
  tensor* a = ctx.new_tensor_3d(type::f32, 4, 3, 2);
  auto* af = static_cast<float*>(a->data);
  for (int i = 0; i < 24; ++i) af[i] = static_cast<float>(i);

  tensor* t = transpose(ctx, a);
  CHECK(t->ne[0] == 3);
  CHECK(t->ne[1] == 4);
  CHECK(t->nb[0] == 16);
  CHECK(t->nb[1] == 4);
  CHECK(t->is_transposed());
  CHECK_FALSE(t->is_contiguous());
  CHECK(t->data == a->data);
  CHECK(t->view_src == a);

  tensor* p = permute(ctx, a, 2, 0, 1, 3);  // a's axis 0 -> 2, 1 -> 0, 2 -> 1
  CHECK(p->ne[0] == 3);
  CHECK(p->ne[1] == 2);
  CHECK(p->ne[2] == 4);
  CHECK(p->nb[2] == 4);
  CHECK(p->is_permuted());
  CHECK(p->op_params[0] == 2);

  tensor* v = view_2d(ctx, a, 2, 3, a->nb[1], 2 * sizeof(float));  // columns 2..3 of slab 0
  CHECK(static_cast<float*>(v->data)[0] == 2.0f);
  CHECK(v->is_contiguous(1));
  CHECK_FALSE(v->is_contiguous());
  tensor* vv = view_1d(ctx, v, 2, 4 * sizeof(float));  // a view of a view resolves to the base
  CHECK(vv->view_src == a);
  CHECK(vv->view_offs == 6 * sizeof(float));
  CHECK(static_cast<float*>(vv->data)[0] == 6.0f);

  tensor* r = reshape_2d(ctx, a, 8, 3);
  CHECK(r->is_contiguous());
  CHECK(r->op == op::reshape);
  CHECK_THROWS_WITH(reshape_2d(ctx, a, 5, 5), Contains("cannot reshape 24 elements"));
  CHECK_THROWS_WITH(reshape_2d(ctx, t, 4, 3), Contains("must be contiguous"));
  CHECK_THROWS_WITH(view_1d(ctx, a, 4, 22 * sizeof(float)), Contains("past the end of its storage"));
  CHECK_THROWS_WITH(permute(ctx, a, 0, 0, 1, 2), Contains("not a permutation"));
}

TEST_CASE("a rejected builder leaves the context as it was", "[tensor][ops]") {
  context ctx({1u << 20});
  tensor* a = ctx.new_tensor_2d(type::f32, 64, 4);
  tensor* b = ctx.new_tensor_2d(type::f32, 63, 4);
  const std::size_t used = ctx.used();
  const std::size_t count = ctx.tensors().size();
  CHECK_THROWS_WITH(mul_mat(ctx, a, b), Contains("mul_mat") && Contains("[64, 4, 1, 1]") && Contains("[63, 4, 1, 1]"));
  CHECK(ctx.used() == used);
  CHECK(ctx.tensors().size() == count);
}

TEST_CASE("graphs list sources before users, leaves apart", "[graph]") {
  context ctx({1u << 20});
  tensor* w = ctx.new_tensor_2d(type::f32, 8, 8);
  tensor* x = ctx.new_tensor_2d(type::f32, 8, 2);
  tensor* y = mul_mat(ctx, w, x);
  tensor* t = transpose(ctx, y);
  tensor* z = mul_mat(ctx, w, y);
  graph g;
  g.build_forward_expand(z);
  g.build_forward_expand(t);
  REQUIRE(g.n_nodes() == 3);
  CHECK(g.node(0) == y);
  CHECK(g.node(1) == z);
  CHECK(g.node(-1) == t);
  CHECK(g.n_leafs() == 2);
  CHECK(g.leafs()[0] == w);
  CHECK(g.leafs()[1] == x);
  g.build_forward_expand(z);  // already there: nothing added
  CHECK(g.n_nodes() == 3);
}

TEST_CASE("a chain of a million nodes builds without recursion", "[graph]") {
  const int n = 1'000'000;
  context ctx({(n + 2) * context::tensor_overhead(), nullptr, true});
  tensor* x = ctx.new_tensor_1d(type::f32, 4);
  tensor* t = x;
  for (int i = 0; i < n; ++i) t = transpose(ctx, t);
  graph g;
  g.build_forward_expand(t);
  CHECK(g.n_nodes() == n);
  CHECK(g.n_leafs() == 1);
  CHECK(g.node(0)->src[0] == x);
  CHECK(g.node(-1) == t);
}
