// SPDX-License-Identifier: MIT
// Backends, buffer types and buffers: the host-side plumbing that lets one graph run on
// several devices. A buffer type is a kind of memory (host RAM, one GPU's memory); it
// hands out buffers, each one contiguous allocation that tensors are placed in. A backend
// computes graphs whose tensors live in memory it can address (supports_buft) and says
// per node whether it has a kernel (supports_op); the scheduler (sched.hpp) does the rest.
//
// These are virtual interfaces on purpose: they are called once per split or per buffer,
// never per row, so a virtual call costs nothing measurable, and a device backend can be
// added without recompiling anything above it.
//
// A tensor's memory: its buffer, else its view base's buffer; a tensor that has data but
// no buffer (a context that allocated it) lives in plain host memory, which memory_of()
// reports as host_buffer_type().
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "gk/core/error.hpp"
#include "gk/graph.hpp"
#include "gk/tensor.hpp"

namespace gk {

struct backend_buffer;

// A kind of memory.
class buffer_type {
 public:
  virtual ~buffer_type() = default;
  virtual std::string_view name() const = 0;
  virtual std::size_t alignment() const = 0;  // every tensor placed in it starts on this boundary
  virtual bool is_host() const = 0;           // the CPU can read and write it through plain pointers
  virtual std::unique_ptr<backend_buffer> alloc_buffer(std::size_t size) = 0;
  // Bytes a tensor needs here (a device may pad rows); the default is its span.
  virtual std::size_t alloc_size(const tensor* t) const { return t->nbytes(); }
};

// One allocation of a buffer_type. Freed when destroyed. Tensors are placed in it with
// init_tensor; set/get/memset address a tensor's bytes from its data pointer, which for a
// device buffer is a device address (never dereferenced on the host).
struct backend_buffer {
  backend_buffer(buffer_type& t, void* b, std::size_t n) : buft(t), base(b), size(n) {}
  backend_buffer(const backend_buffer&) = delete;
  backend_buffer& operator=(const backend_buffer&) = delete;
  virtual ~backend_buffer() = default;

  buffer_type& buft;
  void* base;
  std::size_t size;

  bool is_host() const { return buft.is_host(); }

  // Places t at byte `offset`: t->data and t->buffer point here.
  void init_tensor(tensor* t, std::size_t offset) {
    if (offset % buft.alignment() != 0)
      throw error("gk: buffer " + std::string(buft.name()) + ": tensor " + describe(t) + " placed at offset " +
                  std::to_string(offset) + ", not a multiple of the alignment " + std::to_string(buft.alignment()));
    if (offset > size || buft.alloc_size(t) > size - offset)
      throw error("gk: buffer " + std::string(buft.name()) + ": tensor " + describe(t) + " of " +
                  std::to_string(buft.alloc_size(t)) + " bytes at offset " + std::to_string(offset) +
                  " runs past the buffer's " + std::to_string(size) + " bytes");
    t->data = static_cast<char*>(base) + offset;
    t->buffer = this;
  }

  // Host bytes -> tensor bytes [offset, offset + n) of t (t in this buffer).
  virtual void set_tensor(tensor* t, const void* src, std::size_t offset, std::size_t n) {
    check_range(t, offset, n, "set_tensor");
    std::memcpy(static_cast<char*>(t->data) + offset, src, n);
  }
  // Tensor bytes [offset, offset + n) of t -> host bytes.
  virtual void get_tensor(const tensor* t, void* dst, std::size_t offset, std::size_t n) const {
    check_range(t, offset, n, "get_tensor");
    std::memcpy(dst, static_cast<const char*>(t->data) + offset, n);
  }
  virtual void memset_tensor(tensor* t, std::uint8_t value, std::size_t offset, std::size_t n) {
    check_range(t, offset, n, "memset_tensor");
    std::memset(static_cast<char*>(t->data) + offset, value, n);
  }
  // dst (in this buffer) = src, same layout, when this buffer can do it without the host
  // (a device-to-device copy); false means "not here, go through host memory".
  virtual bool copy_tensor(const tensor* src, tensor* dst) {
    (void)src;
    (void)dst;
    return false;
  }
  virtual void clear(std::uint8_t value) { std::memset(base, value, size); }

 protected:
  void check_range(const tensor* t, std::size_t offset, std::size_t n, const char* what) const {
    const std::size_t span = t->nbytes();
    if (offset > span || n > span - offset)
      throw error("gk: " + std::string(what) + " on " + describe(t) + ": bytes [" + std::to_string(offset) + ", " +
                  std::to_string(offset + n) + ") run past its " + std::to_string(span) + " bytes");
    if (!t->data) throw error("gk: " + std::string(what) + " on " + describe(t) + ": the tensor has no storage");
  }
};

// Host memory from aligned operator new: the CPU's buffer, and the storage of any buffer
// type whose memory is ordinary RAM.
struct host_buffer : backend_buffer {
  host_buffer(buffer_type& t, std::size_t n, std::size_t align)
      : backend_buffer(t, ::operator new(n ? n : 1, std::align_val_t{align}, std::nothrow), n), align_(align) {
    if (!base)
      throw error("gk: buffer " + std::string(t.name()) + ": cannot allocate " + std::to_string(n) + " bytes");
  }
  ~host_buffer() override { ::operator delete(base, std::align_val_t{align_}); }

 private:
  std::size_t align_;
};

class host_buffer_type_impl final : public buffer_type {
 public:
  std::string_view name() const override { return "CPU"; }
  // 64: one cache line, and every SIMD row load of the widest target (AVX-512) aligned
  std::size_t alignment() const override { return 64; }
  bool is_host() const override { return true; }
  std::unique_ptr<backend_buffer> alloc_buffer(std::size_t size) override {
    return std::make_unique<host_buffer>(*this, size, alignment());
  }
};

// The one host memory type. Tensors a context allocated (data, no buffer) count as in it.
inline buffer_type& host_buffer_type() {
  static host_buffer_type_impl t;
  return t;
}

// The buffer a tensor's bytes are in: its own, else its view base's (null for context memory).
inline backend_buffer* buffer_of(const tensor* t) noexcept {
  if (t->buffer) return t->buffer;
  if (t->view_src && t->view_src->buffer) return t->view_src->buffer;
  return nullptr;
}

// The memory a tensor lives in now, or null if it has no storage yet.
inline buffer_type* memory_of(const tensor* t) noexcept {
  if (backend_buffer* b = buffer_of(t)) return &b->buft;
  const tensor* base = t->view_src ? t->view_src : t;
  if (t->data || base->data) return &host_buffer_type();
  return nullptr;
}

// dst = src byte for byte over src's span; both must have the same type, shape and
// strides. Goes device-to-device where dst's buffer can, else through host memory.
inline void copy_tensor(const tensor* src, tensor* dst) {
  if (src->type != dst->type || !src->same_shape(*dst) || !src->same_strides(*dst))
    throw error("gk: copy_tensor: " + describe(src) + " and " + describe(dst) +
                " differ in type, shape or strides; a raw copy needs the same layout");
  const std::size_t n = src->nbytes();
  if (n == 0) return;
  backend_buffer* sb = buffer_of(src);
  backend_buffer* db = buffer_of(dst);
  const bool src_host = !sb || sb->is_host();
  const bool dst_host = !db || db->is_host();
  if (db && db->copy_tensor(src, dst)) return;
  if (src_host && dst_host) {
    std::memcpy(dst->data, src->data, n);
  } else if (src_host) {
    db->set_tensor(dst, src->data, 0, n);
  } else if (dst_host) {
    sb->get_tensor(src, dst->data, 0, n);
  } else {
    std::vector<unsigned char> bounce(n);
    sb->get_tensor(src, bounce.data(), 0, n);
    db->set_tensor(dst, bounce.data(), 0, n);
  }
}

// A device (or the CPU) that computes graphs.
class backend {
 public:
  virtual ~backend() = default;
  virtual std::string_view name() const = 0;
  // Where the scheduler places this backend's node outputs and staging copies.
  virtual buffer_type& default_buffer_type() = 0;
  // Computes every node of g in order. Every tensor g touches is in memory this backend
  // supports_buft; the scheduler guarantees it by staging.
  virtual void graph_compute(const graph& g) = 0;
  virtual bool supports_op(const tensor* node) const = 0;
  virtual bool supports_buft(const buffer_type& buft) const = 0;
  // Whether this backend reads source `slot` of node where it lies, in memory `mem`; if not,
  // the scheduler stages a copy in default_buffer_type(). By default: the memory it
  // addresses. The CPU also reads mul_mat weights from CPU_TILED (cpu/tiled.hpp).
  virtual bool reads_in_place(const tensor* node, int slot, const buffer_type& mem) const {
    (void)node;
    (void)slot;
    return supports_buft(mem);
  }
  // Returns when all work submitted so far has finished (a no-op for synchronous backends).
  virtual void synchronize() {}
};

}  // namespace gk
