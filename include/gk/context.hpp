// SPDX-License-Identifier: MIT
// gk::context: a fixed arena that holds tensor headers and (unless no_alloc) their data.
// One bump pointer, no free: a context lives as long as the graph built in it. With
// no_alloc the arena holds headers only and data stays null until an allocator (alloc.hpp)
// or the caller places it; that is how graphs are planned before memory exists.
//
// Running out of arena is an error that names the tensor being made, its op, the bytes it
// needs and what is left; nothing is written past the arena and the context stays usable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstdlib>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "gk/core/error.hpp"
#include "gk/tensor.hpp"

namespace gk {

struct context_params {
  std::size_t mem_size = 0;      // arena bytes
  void* mem_buffer = nullptr;    // caller's memory, or null to let the context allocate it
  bool no_alloc = false;         // headers only; data pointers stay null
};

class context {
 public:
  static constexpr std::size_t data_align = 64;  // one cache line: SIMD rows never split one
  // Arena bytes one tensor header takes, padding included; add the data (rounded up to
  // data_align) for each tensor that owns storage.
  static constexpr std::size_t tensor_overhead() noexcept { return pad(sizeof(tensor)) + data_align; }
  static constexpr std::size_t pad(std::size_t n) noexcept { return (n + data_align - 1) / data_align * data_align; }

  explicit context(context_params p) : size_(p.mem_size), no_alloc_(p.no_alloc) {
    if (p.mem_buffer) {
      buf_ = static_cast<char*>(p.mem_buffer);
    } else if (size_ > 0) {
      buf_ = static_cast<char*>(::operator new(size_, std::align_val_t{data_align}, std::nothrow));
      if (!buf_) throw error("gk: context: cannot allocate an arena of " + std::to_string(size_) + " bytes");
      owned_ = true;
    }
    // The first header must sit on a data_align boundary even in a caller's buffer.
    auto addr = reinterpret_cast<std::uintptr_t>(buf_);
    used_ = addr % data_align ? data_align - addr % data_align : 0;
    if (used_ > size_) used_ = size_;
  }
  context(const context&) = delete;
  context& operator=(const context&) = delete;
  ~context() {
    if (owned_) ::operator delete(buf_, std::align_val_t{data_align});
  }

  bool no_alloc() const noexcept { return no_alloc_; }
  void set_no_alloc(bool v) noexcept { no_alloc_ = v; }
  std::size_t used() const noexcept { return used_; }
  std::size_t size() const noexcept { return size_; }
  const std::vector<tensor*>& tensors() const noexcept { return tensors_; }

  tensor* find(std::string_view name) const noexcept {
    for (tensor* t : tensors_)
      if (t->get_name() == name) return t;
    return nullptr;
  }

  // The op being built, for error messages (builders set it; see ops/common.hpp).
  std::string_view building = {};

  // A new tensor of `type` and shape ne[0..n_dims), default strides. If view_src is given
  // the tensor aliases view_src's storage at byte view_offs (views of views resolve to
  // the base) and takes no data of its own.
  tensor* new_tensor(gk::type t, int n_dims, const std::int64_t* ne, tensor* view_src = nullptr,
                     std::size_t view_offs = 0) {
    if (!is_valid(t)) throw error("gk: new_tensor: unknown " + type_label(t));
    if (n_dims < 1 || n_dims > max_dims)
      throw error("gk: new_tensor: n_dims must be 1..4, got " + std::to_string(n_dims));
    std::int64_t full[max_dims] = {1, 1, 1, 1};
    for (int i = 0; i < n_dims; ++i) {
      if (ne[i] < 0) throw error(what(t, ne, n_dims) + ": negative dimension");
      full[i] = ne[i];
    }
    if (full[0] % gk::block_size(t) != 0)
      throw error(what(t, full, n_dims) + ": ne[0] = " + std::to_string(full[0]) + " is not a multiple of " +
                  std::string(gk::name(t)) + "'s block size " + std::to_string(gk::block_size(t)));
    if (view_src && view_src->view_src) {
      view_offs += view_src->view_offs;
      view_src = view_src->view_src;
    }
    std::size_t data_size = gk::row_size(t, full[0]);
    for (int i = 1; i < max_dims; ++i) data_size *= static_cast<std::size_t>(full[i]);
    if (view_src && data_size != 0 && data_size + view_offs > view_src->nbytes())
      throw error(what(t, full, n_dims) + ": a view of " + std::to_string(data_size) + " bytes at offset " +
                  std::to_string(view_offs) + " runs past its source " + describe(view_src) + " (" +
                  std::to_string(view_src->nbytes()) + " bytes)");

    const std::size_t header = pad(sizeof(tensor));
    const std::size_t payload = (view_src == nullptr && !no_alloc_) ? pad(data_size) : 0;
    if (used_ > size_ || header > size_ - used_ || payload > size_ - used_ - header)
      throw error("gk: context arena exhausted creating " + what(t, full, n_dims) + ": needs " +
                  std::to_string(header + payload) + " bytes (" + std::to_string(header) + " header + " +
                  std::to_string(payload) + " data), " + std::to_string(size_ - std::min(used_, size_)) +
                  " of " + std::to_string(size_) + " left");
    // the only other thing that can throw; do it before anything changes
    if (tensors_.size() == tensors_.capacity()) tensors_.reserve(tensors_.size() * 2 + 64);
    auto* r = new (buf_ + used_) tensor{};
    used_ += header + payload;
    r->type = t;
    for (int i = 0; i < max_dims; ++i) r->ne[i] = full[i];
    r->nb[0] = gk::type_size(t);
    r->nb[1] = r->nb[0] * static_cast<std::size_t>(full[0] / gk::block_size(t));
    for (int i = 2; i < max_dims; ++i) r->nb[i] = r->nb[i - 1] * static_cast<std::size_t>(full[i - 1]);
    r->op = op::none;
    r->view_src = view_src;
    r->view_offs = view_offs;
    if (payload) r->data = reinterpret_cast<char*>(r) + header;
    else if (view_src && view_src->data) r->data = static_cast<char*>(view_src->data) + view_offs;
    tensors_.push_back(r);
    return r;
  }

  tensor* new_tensor_1d(gk::type t, std::int64_t ne0) { return new_tensor(t, 1, &ne0); }
  tensor* new_tensor_2d(gk::type t, std::int64_t ne0, std::int64_t ne1) {
    const std::int64_t ne[2] = {ne0, ne1};
    return new_tensor(t, 2, ne);
  }
  tensor* new_tensor_3d(gk::type t, std::int64_t ne0, std::int64_t ne1, std::int64_t ne2) {
    const std::int64_t ne[3] = {ne0, ne1, ne2};
    return new_tensor(t, 3, ne);
  }
  tensor* new_tensor_4d(gk::type t, std::int64_t ne0, std::int64_t ne1, std::int64_t ne2, std::int64_t ne3) {
    const std::int64_t ne[4] = {ne0, ne1, ne2, ne3};
    return new_tensor(t, 4, ne);
  }
  // Same type and shape as `src`, own storage.
  tensor* dup_tensor(const tensor* src) { return new_tensor(src->type, max_dims, src->ne); }
  // Same type, shape and strides as `src`, aliasing its storage.
  tensor* view_tensor(tensor* src) {
    tensor* r = new_tensor(src->type, max_dims, src->ne, src, 0);
    for (int i = 0; i < max_dims; ++i) r->nb[i] = src->nb[i];
    return r;
  }

 private:
  std::string what(gk::type t, const std::int64_t* ne, int n_dims) const {
    std::int64_t full[max_dims] = {1, 1, 1, 1};
    for (int i = 0; i < n_dims; ++i) full[i] = ne[i];
    std::string s = "tensor #" + std::to_string(tensors_.size()) + " " + std::string(gk::name(t)) + " " +
                    shape_string(full);
    if (!building.empty()) s += " for op " + std::string(building);
    return s;
  }

  char* buf_ = nullptr;
  std::size_t size_ = 0;
  std::size_t used_ = 0;
  bool owned_ = false;
  bool no_alloc_ = false;
  std::vector<tensor*> tensors_;
};

}  // namespace gk
