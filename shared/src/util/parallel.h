// Per-item work on the machine's cores: fn(i) for i in [0, n), natively on up to hardware_concurrency threads (the
// calling one included; ALLOCSCOPE_THREADS=N caps them, 1 = in order on the calling thread, as benchmarks compare),
// in WebAssembly in order on the one thread it is built with. fn may only write what belongs to its own i.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <utility>
#include <vector>
#if !defined(__EMSCRIPTEN__)
#include <thread>
#endif

namespace allocscope::detail {

// How many threads `n` independent items may use: the cores, capped by ALLOCSCOPE_THREADS and by n (1 in wasm).
inline size_t threads_for(size_t n) {
#if defined(__EMSCRIPTEN__)
  (void)n;
  return 1;
#else
  size_t threads = std::min<size_t>(n, std::max(1u, std::thread::hardware_concurrency()));
  if (const char* cap = std::getenv("ALLOCSCOPE_THREADS"); cap && std::atoi(cap) > 0)
    threads = std::min<size_t>(threads, static_cast<size_t>(std::atoi(cap)));
  return threads;
#endif
}

template <class Fn>
void parallel_for(size_t n, Fn&& fn) {
#if defined(__EMSCRIPTEN__)
  for (size_t i = 0; i < n; ++i) fn(i);
#else
  const size_t threads = threads_for(n);
  if (threads <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) fn(i);
  };
  std::vector<std::thread> pool;
  for (size_t k = 1; k < threads; ++k) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
#endif
}

// Two independent pieces of work at once: `a` on a thread of its own, `b` on the calling one, when `spare` (a core
// is free for it: the caller knows whether its own callers already fill the cores); else a, then b, in order. Each
// may only write what belongs to it.
template <class A, class B>
void both(bool spare, A&& a, B&& b) {
#if defined(__EMSCRIPTEN__)
  (void)spare;
  a();
  b();
#else
  if (!spare || threads_for(2) < 2) {
    a();
    b();
    return;
  }
  std::thread t(std::forward<A>(a));
  b();
  t.join();
#endif
}

}  // namespace allocscope::detail
