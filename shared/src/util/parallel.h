// Per-item work on the process's cores: fn(i) for i in [0, n), natively on up to usable_cores() threads (the
// calling one included; ALLOCSCOPE_THREADS=N caps them, 1 = in order on the calling thread, as benchmarks compare),
// in WebAssembly in order on the one thread it is built with. fn may only write what belongs to its own i.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "allocscope/threads.h"
#if !defined(__EMSCRIPTEN__)
#include <system_error>
#include <thread>
#endif

namespace allocscope::detail {

#if !defined(__EMSCRIPTEN__)
// Set while a thread holds a SingleThreaded (allocscope/threads.h): its work starts no thread of its own.
inline thread_local bool t_single_threaded = false;
#endif

// How many threads `n` independent items may use: the cores this process may run on (usable_cores), capped by
// ALLOCSCOPE_THREADS and by n (1 in wasm, and on a thread that holds a SingleThreaded). Every thread the loader and
// the analyses start asks here first.
inline size_t threads_for(size_t n) {
#if defined(__EMSCRIPTEN__)
  (void)n;
  return 1;
#else
  if (t_single_threaded) return 1;
  size_t threads = std::min<size_t>(n, usable_cores());
  if (const char* cap = std::getenv("ALLOCSCOPE_THREADS"); cap && std::atoi(cap) > 0)
    threads = std::min<size_t>(threads, static_cast<size_t>(std::atoi(cap)));
  return threads;
#endif
}

// Below this many trace events a file's analyses take well under a millisecond each, less than starting a thread
// for one costs: `ranks` on 1,000 files of 417 events took 1.98 s with their threads and 1.63 s without. The
// analyses' entry points (build_lifetimes, summarize) hold a SingleThreaded below it.
constexpr size_t kEventsWorthAThread = size_t{1} << 16;

#if !defined(__EMSCRIPTEN__)
// Work on a thread of its own whose exception reaches the thread that joins it, as if the work had run there: one
// leaving a std::thread's function calls std::terminate, so running out of memory on a worker (a large file's
// per-device analyses, the loader's reads) aborted the process instead of giving its one-line answer. When no thread
// can be started (no memory for its stack, or the process's thread limit), started() is false and the caller does
// the work itself. The destructor joins, so an exception on the caller's side never leaves a thread running.
class Worker {
 public:
  template <class Fn>
  explicit Worker(Fn&& fn) : error_(std::make_unique<std::exception_ptr>()) {
    try {
      thread_ = std::thread([fn = std::forward<Fn>(fn), error = error_.get()]() mutable {
        try {
          fn();
        } catch (...) {
          *error = std::current_exception();
        }
      });
    } catch (const std::system_error&) {
    } catch (const std::bad_alloc&) {
    }
  }
  Worker(Worker&&) = default;
  Worker& operator=(Worker&&) = delete;
  ~Worker() {
    if (thread_.joinable()) thread_.join();
  }
  bool started() const { return thread_.joinable(); }
  // Waits for the work, then rethrows what it threw.
  void join() {
    if (thread_.joinable()) thread_.join();
    if (error_ && *error_) std::rethrow_exception(std::exchange(*error_, nullptr));
  }

 private:
  std::unique_ptr<std::exception_ptr> error_;  // on the heap, so that a Worker can move while its thread runs
  std::thread thread_;
};
#endif

// `max_threads` bounds the threads where each item holds much memory while it runs.
template <class Fn>
void parallel_for(size_t n, Fn&& fn, size_t max_threads = SIZE_MAX) {
#if defined(__EMSCRIPTEN__)
  (void)max_threads;
  for (size_t i = 0; i < n; ++i) fn(i);
#else
  const size_t threads = threads_for(std::min(n, max_threads));
  if (threads <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<size_t> next{0};
  auto work = [&] {
    try {
      for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) fn(i);
    } catch (...) {
      next.store(n, std::memory_order_relaxed);  // the others stop at their next item
      throw;
    }
  };
  std::vector<Worker> pool;
  pool.reserve(threads - 1);
  for (size_t k = 1; k < threads; ++k) {
    pool.emplace_back(work);
    if (!pool.back().started()) {
      pool.pop_back();
      break;
    }
  }
  work();
  for (Worker& w : pool) w.join();
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
  Worker t([&a] { a(); });  // by reference: `a` is still whole when no thread starts
  if (!t.started()) {
    a();
    b();
    return;
  }
  b();
  t.join();
#endif
}

}  // namespace allocscope::detail
