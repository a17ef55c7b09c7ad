// SPDX-License-Identifier: MIT
// The CUDA backend: device memory as a buffer type, discovery with an empty-launch probe,
// and graph_compute routing each node to its op family (ops.hpp).
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common.cuh"
#include "gk/backends/cuda.hpp"
#include "gk/registry.hpp"
#include "ops.hpp"

#ifndef GK_CUDA_ARCHS
#define GK_CUDA_ARCHS "unknown"
#endif

namespace gk::cuda {

namespace {

__global__ void __launch_bounds__(1) probe_kernel(int* out) {
  if (out) *out = 1;
}

class cuda_buffer_type;

struct cuda_buffer final : backend_buffer {
  cuda_buffer(buffer_type& t, int device, void* p, std::size_t n) : backend_buffer(t, p, n), device_(device) {}
  ~cuda_buffer() override {
    if (base) {
      cudaSetDevice(device_);
      cudaFree(base);
    }
  }
  void set_tensor(tensor* t, const void* src, std::size_t offset, std::size_t n) override {
    check_range(t, offset, n, "set_tensor");
    GK_CUDA_CHECK(cudaSetDevice(device_));
    GK_CUDA_CHECK(cudaMemcpy(static_cast<char*>(t->data) + offset, src, n, cudaMemcpyHostToDevice));
    // from pageable memory cudaMemcpy may return before the DMA lands: finish it here, so
    // the bytes are in place for any stream that reads them next
    GK_CUDA_CHECK(cudaDeviceSynchronize());
  }
  void get_tensor(const tensor* t, void* dst, std::size_t offset, std::size_t n) const override {
    check_range(t, offset, n, "get_tensor");
    GK_CUDA_CHECK(cudaSetDevice(device_));
    GK_CUDA_CHECK(cudaMemcpy(dst, static_cast<const char*>(t->data) + offset, n, cudaMemcpyDeviceToHost));
  }
  void memset_tensor(tensor* t, std::uint8_t value, std::size_t offset, std::size_t n) override {
    check_range(t, offset, n, "memset_tensor");
    GK_CUDA_CHECK(cudaSetDevice(device_));
    GK_CUDA_CHECK(cudaMemset(static_cast<char*>(t->data) + offset, value, n));
    GK_CUDA_CHECK(cudaDeviceSynchronize());  // cudaMemset is asynchronous to the host
  }
  bool copy_tensor(const tensor* src, tensor* dst) override {
    backend_buffer* sb = buffer_of(src);
    if (!sb || &sb->buft != &buft) return false;  // another memory: through the host
    GK_CUDA_CHECK(cudaSetDevice(device_));
    GK_CUDA_CHECK(cudaMemcpy(dst->data, src->data, src->nbytes(), cudaMemcpyDeviceToDevice));
    GK_CUDA_CHECK(cudaDeviceSynchronize());  // device-to-device cudaMemcpy is asynchronous too
    return true;
  }
  void clear(std::uint8_t value) override {
    GK_CUDA_CHECK(cudaSetDevice(device_));
    GK_CUDA_CHECK(cudaMemset(base, value, size));
    GK_CUDA_CHECK(cudaDeviceSynchronize());
  }

 private:
  int device_;
};

class cuda_buffer_type final : public buffer_type {
 public:
  explicit cuda_buffer_type(int device) : device_(device), name_("CUDA" + std::to_string(device)) {}
  std::string_view name() const override { return name_; }
  std::size_t alignment() const override { return 256; }
  bool is_host() const override { return false; }
  std::unique_ptr<backend_buffer> alloc_buffer(std::size_t size) override {
    GK_CUDA_CHECK(cudaSetDevice(device_));
    void* p = nullptr;
    // kernels may load whole 16-byte vectors at a row's end: pad the allocation
    const std::size_t n = size + 256;
    cudaError_t e = cudaMalloc(&p, n);
    if (e != cudaSuccess)
      throw error("gk: buffer " + name_ + ": cannot allocate " + std::to_string(size) + " bytes: " +
                  cudaGetErrorString(e));
    // fresh device memory reads as NaN everywhere: an output a kernel never wrote shows
    GK_CUDA_CHECK(cudaMemset(p, 0xff, n));
    GK_CUDA_CHECK(cudaDeviceSynchronize());
    return std::make_unique<cuda_buffer>(*this, device_, p, size);
  }
  int device() const { return device_; }

 private:
  int device_;
  std::string name_;
};

device_props props_of(int device) {
  cudaDeviceProp p{};
  GK_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  device_props d;
  d.device = device;
  d.cc = p.major * 10 + p.minor;
  d.sm_count = p.multiProcessorCount;
  d.smem_per_block_optin = p.sharedMemPerBlockOptin;
  d.l2_bytes = static_cast<std::size_t>(p.l2CacheSize);
  cudaFuncAttributes fa{};
  GK_CUDA_CHECK(cudaSetDevice(device));
  GK_CUDA_CHECK(cudaFuncGetAttributes(&fa, probe_kernel));
  d.ptx = fa.ptxVersion;
  return d;
}

// Which family computes a node (null: none on this device).
enum class family { none, skip, elementwise, copy, reduce, norm, softmax, rope, attn, matmul };

family family_of(op o) {
  switch (o) {
    case op::none: case op::reshape: case op::view: case op::permute: case op::transpose: return family::skip;
    case op::add: case op::sub: case op::mul: case op::div: case op::add1: case op::add_id: case op::sqr:
    case op::sqrt: case op::log: case op::sin: case op::cos: case op::unary: case op::glu: case op::scale:
    case op::clamp: case op::leaky_relu: case op::fill: case op::arange: return family::elementwise;
    case op::dup: case op::cpy: case op::cont: case op::set_rows: case op::repeat: case op::concat:
      return family::copy;
    case op::sum: case op::sum_rows: case op::mean: case op::argmax: case op::argsort: case op::top_k:
      return family::reduce;
    case op::norm: case op::rms_norm: case op::group_norm: case op::l2_norm: return family::norm;
    case op::soft_max: case op::diag_mask_inf: case op::diag_mask_zero: return family::softmax;
    case op::rope: return family::rope;
    case op::flash_attn_ext: return family::attn;
    case op::mul_mat: case op::mul_mat_id: case op::get_rows: return family::matmul;
    default: return family::none;
  }
}

bool family_supports(family f, const tensor* n) {
  switch (f) {
    case family::skip: return true;
    case family::elementwise: return elementwise_supports(n);
    case family::copy: return copy_supports(n);
    case family::reduce: return reduce_supports(n);
    case family::norm: return norm_supports(n);
    case family::softmax: return softmax_supports(n);
    case family::rope: return rope_supports(n);
    case family::attn: return attn_supports(n);
    case family::matmul: return matmul_supports(n);
    default: return false;
  }
}

void family_run(family f, const tensor* n, exec& x) {
  switch (f) {
    case family::skip: return;
    case family::elementwise: return elementwise_run(n, x);
    case family::copy: return copy_run(n, x);
    case family::reduce: return reduce_run(n, x);
    case family::norm: return norm_run(n, x);
    case family::softmax: return softmax_run(n, x);
    case family::rope: return rope_run(n, x);
    case family::attn: return attn_run(n, x);
    case family::matmul: return matmul_run(n, x);
    default: throw error("gk: CUDA: no kernel for " + describe(n));
  }
}

class cuda_backend final : public backend {
 public:
  explicit cuda_backend(int device) : device_(device), name_("CUDA" + std::to_string(device)) {
    GK_CUDA_CHECK(cudaSetDevice(device_));
    x_.props = props_of(device_);
    // a blocking stream: it orders itself after work on the legacy default stream, where
    // the buffers' cudaMemset and pageable cudaMemcpy run (a non-blocking stream raced them:
    // a poisoning memset could land after a kernel's output, an upload after its read)
    GK_CUDA_CHECK(cudaStreamCreate(&x_.stream));
  }
  ~cuda_backend() override {
    cudaSetDevice(device_);
    cudaStreamSynchronize(x_.stream);
    x_.release();
    cudaStreamSynchronize(x_.stream);
    cudaStreamDestroy(x_.stream);
  }
  std::string_view name() const override { return name_; }
  buffer_type& default_buffer_type() override { return device_buffer_type(device_); }
  bool supports_buft(const buffer_type& b) const override { return &b == &device_buffer_type(device_); }
  bool supports_op(const tensor* node) const override {
    const family f = family_of(node->op);
    if (f == family::none) return false;
    // every source and the node itself must be in memory this device can address, or
    // placeable (no storage yet): the scheduler stages the rest
    return family_supports(f, node);
  }
  void graph_compute(const graph& g) override {
    GK_CUDA_CHECK(cudaSetDevice(device_));
    // encoded activations are claimed within one graph (exec::claim): what other backends
    // or the caller wrote between graphs is unseen here
    x_.drop_claims();
    const bool by_address = claims_by_address();
    for (tensor* n : g.nodes()) {
      const family f = family_of(n->op);
      if (f == family::skip || n->is_empty()) continue;
      if (f == family::none || !family_supports(f, n))
        throw error("gk: CUDA: node " + describe(n) + " has no kernel on this device (supports_op refuses it)");
      try {
        family_run(f, n, x_);
      } catch (const error& e) {
        x_.drop_claims();
        throw error(std::string(e.what()) + " [node " + describe(n) + "]");
      }
      x_.wrote(n, by_address);
    }
    x_.drop_claims();
    GK_CUDA_CHECK(cudaStreamSynchronize(x_.stream));
  }
  void synchronize() override { GK_CUDA_CHECK(cudaStreamSynchronize(x_.stream)); }

 private:
  int device_;
  std::string name_;
  exec x_;
};

struct probed {
  std::vector<int> usable;
  std::vector<device_info> infos;
};

const probed& probe_all() {
  static probed p = [] {
    probed r;
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();
      return r;
    }
    for (int d = 0; d < n; ++d) {
      cudaDeviceProp prop{};
      if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) continue;
      cudaSetDevice(d);
      probe_kernel<<<1, 1>>>(nullptr);
      cudaError_t e = cudaGetLastError();
      if (e == cudaSuccess) e = cudaDeviceSynchronize();
      if (e != cudaSuccess) {
        std::fprintf(stderr, "gk: CUDA device %d (%s, compute capability %d.%d) not registered: %s; this build has code for %s\n",
                     d, prop.name, prop.major, prop.minor, cudaGetErrorString(e), GK_CUDA_ARCHS);
        cudaGetLastError();
        continue;
      }
      std::size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      device_info info;
      info.name = "CUDA" + std::to_string(d);
      info.description = prop.name;
      info.memory_total = total_b;
      info.memory_free = free_b;
      info.type = device_type::gpu;
      info.device_features = "cc " + std::to_string(prop.major) + "." + std::to_string(prop.minor) + ", " +
                             std::to_string(prop.multiProcessorCount) + " SMs, " +
                             std::to_string(prop.sharedMemPerBlockOptin / 1024) + " KiB shared/block, built for " +
                             GK_CUDA_ARCHS;
      info.make_backend = [d] { return make_backend(d); };
      r.usable.push_back(d);
      r.infos.push_back(std::move(info));
    }
    return r;
  }();
  return p;
}

}  // namespace

std::vector<device_info> discover() { return probe_all().infos; }
int device_count() { return static_cast<int>(probe_all().usable.size()); }
std::string architectures_built() { return GK_CUDA_ARCHS; }

buffer_type& device_buffer_type(int device) {
  static std::mutex m;
  static std::map<int, std::unique_ptr<cuda_buffer_type>> types;
  std::lock_guard<std::mutex> lock(m);
  auto& t = types[device];
  if (!t) t = std::make_unique<cuda_buffer_type>(device);
  return *t;
}

std::unique_ptr<backend> make_backend(int device) {
  const auto& p = probe_all();
  bool ok = false;
  for (int d : p.usable) ok = ok || d == device;
  if (!ok)
    throw error("gk: CUDA device " + std::to_string(device) + " is not usable by this build (" +
                std::to_string(p.usable.size()) + " usable; built for " + GK_CUDA_ARCHS + ")");
  return std::make_unique<cuda_backend>(device);
}

}  // namespace gk::cuda
