// Counting replacements of the global operator new/delete (sizes via malloc_usable_size, so no headers are needed).
#include "alloc_meter.h"

#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <new>

namespace hostile {
namespace {
std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};
std::atomic<int64_t> g_cap{INT64_MAX};  // absolute live-byte ceiling while a Meter is active

void* counted_alloc(std::size_t n, bool nothrow) {
  const int64_t cap = g_cap.load(std::memory_order_relaxed);
  if (cap != INT64_MAX && static_cast<int64_t>(n) > cap - g_live.load(std::memory_order_relaxed)) {
    if (nothrow) return nullptr;
    throw std::bad_alloc();
  }
  void* p = std::malloc(n ? n : 1);
  if (!p) {
    if (nothrow) return nullptr;
    throw std::bad_alloc();
  }
  const int64_t live = g_live.fetch_add(static_cast<int64_t>(malloc_usable_size(p))) +
                       static_cast<int64_t>(malloc_usable_size(p));
  int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (live > peak && !g_peak.compare_exchange_weak(peak, live)) {
  }
  return p;
}

void counted_free(void* p) {
  if (!p) return;
  g_live.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)));
  std::free(p);
}
}  // namespace

Meter::Meter(int64_t cap) {
  start_ = g_live.load();
  saved_peak_ = g_peak.exchange(start_);
  saved_cap_ = g_cap.exchange(start_ + cap);
}

Meter::~Meter() {
  g_cap.store(saved_cap_);
  int64_t peak = g_peak.load();
  if (saved_peak_ > peak) g_peak.store(saved_peak_);
}

int64_t Meter::peak_bytes() const { return g_peak.load() - start_; }

}  // namespace hostile

void* operator new(std::size_t n) { return hostile::counted_alloc(n, false); }
void* operator new[](std::size_t n) { return hostile::counted_alloc(n, false); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return hostile::counted_alloc(n, true); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return hostile::counted_alloc(n, true); }
void operator delete(void* p) noexcept { hostile::counted_free(p); }
void operator delete[](void* p) noexcept { hostile::counted_free(p); }
void operator delete(void* p, std::size_t) noexcept { hostile::counted_free(p); }
void operator delete[](void* p, std::size_t) noexcept { hostile::counted_free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { hostile::counted_free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { hostile::counted_free(p); }
