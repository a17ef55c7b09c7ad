// SPDX-License-Identifier: MIT
// A fork-join pool: run(f) calls f(ith, nth) on nth threads (the caller is thread 0) and
// returns when all have finished; inside f, barrier() waits for all nth. The compute pass
// walks the node list on every thread in step, one barrier per node.
//
// The barrier spins briefly, then sleeps on the generation counter (C++20 atomic wait):
// spinning alone would starve a machine running more threads than cores, and the tests
// run 64 threads on two cores.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "gk/core/error.hpp"

namespace gk::cpu {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

class barrier {
 public:
  explicit barrier(int n) : n_(n) {}
  void arrive_and_wait() noexcept {
    const std::uint32_t gen = gen_.load(std::memory_order_acquire);
    if (count_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_) {
      count_.store(0, std::memory_order_relaxed);
      gen_.fetch_add(1, std::memory_order_acq_rel);
      gen_.notify_all();
      return;
    }
    for (int i = 0; i < spin_iterations; ++i) {
      if (gen_.load(std::memory_order_acquire) != gen) return;
      cpu_relax();
    }
    while (gen_.load(std::memory_order_acquire) == gen) gen_.wait(gen, std::memory_order_acquire);
  }

 private:
  static constexpr int spin_iterations = 4096;  // ~10 us: a node on a busy core
  const int n_;
  std::atomic<int> count_{0};
  std::atomic<std::uint32_t> gen_{0};
};

class threadpool {
 public:
  explicit threadpool(int n_threads) : nth_(n_threads < 1 ? 1 : n_threads), barrier_(nth_), start_(nth_) {
    workers_.reserve(static_cast<std::size_t>(nth_ - 1));
    for (int i = 1; i < nth_; ++i) workers_.emplace_back([this, i] { worker(i); });
  }
  threadpool(const threadpool&) = delete;
  threadpool& operator=(const threadpool&) = delete;
  ~threadpool() {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
      ++epoch_;
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
  }

  int size() const noexcept { return nth_; }

  // Calls f(ith, nth) on every thread; rethrows the first exception any thread threw.
  // f must not return early on some threads while others wait in barrier().
  void run(const std::function<void(int, int)>& f) {
    error_ = nullptr;
    job_ = &f;
    {
      std::lock_guard lk(mu_);
      ++epoch_;
    }
    cv_.notify_all();
    call(0);
    start_.arrive_and_wait();  // all workers done with this job
    job_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

  void sync() noexcept { barrier_.arrive_and_wait(); }

 private:
  void call(int ith) {
    try {
      (*job_)(ith, nth_);
    } catch (...) {
      std::lock_guard lk(err_mu_);
      if (!error_) error_ = std::current_exception();
    }
  }
  void worker(int ith) {
    std::uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock lk(mu_);
        cv_.wait(lk, [&] { return epoch_ != seen; });
        seen = epoch_;
        if (stop_) return;
      }
      call(ith);
      start_.arrive_and_wait();
    }
  }

  const int nth_;
  barrier barrier_;
  barrier start_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::uint64_t epoch_ = 0;
  bool stop_ = false;
  const std::function<void(int, int)>* job_ = nullptr;
  std::mutex err_mu_;
  std::exception_ptr error_;
};

}  // namespace gk::cpu
