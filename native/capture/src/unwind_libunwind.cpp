// The libunwind back-end of unwind.h: unw_backtrace with a per-thread cache, then drops our and the driver's frames.
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <link.h>

#include <atomic>
#include <cstring>

#include "unwind.h"

namespace allocscope::capture {
namespace {

struct Range { uintptr_t lo, hi; };
constexpr int kMaxRanges = 64;
Range g_ranges[kMaxRanges];
std::atomic<int> g_range_count{0};

bool in_skip_range(uintptr_t ip) {
  const int n = g_range_count.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i)
    if (ip >= g_ranges[i].lo && ip < g_ranges[i].hi) return true;
  return false;
}

// Adds the executable PT_LOAD segments of modules matched by `match`.
template <typename Match>
void add_modules(Match match) {
  struct Ctx { Match* match; } ctx{&match};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        auto* c = static_cast<Ctx*>(data);
        if (!(*c->match)(info)) return 0;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const auto& ph = info->dlpi_phdr[i];
          if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
            add_skip_range(info->dlpi_addr + ph.p_vaddr, info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
        }
        return 0;
      },
      &ctx);
}

#if defined(__SANITIZE_THREAD__)
// Under TSan: step frame by frame. unw_backtrace's fast path keeps a per-thread trace cache whose TSD destructor
// locks a mutex after TSan has retired the thread (a crash inside TSan, not a race of ours).
__attribute__((always_inline)) inline int backtrace_into(void** buf, int max) {
  unw_context_t uc;
  unw_cursor_t cursor;
  if (unw_getcontext(&uc) != 0 || unw_init_local(&cursor, &uc) != 0) return 0;
  int n = 0;
  do {
    unw_word_t ip = 0;
    if (unw_get_reg(&cursor, UNW_REG_IP, &ip) != 0 || ip == 0) break;
    buf[n++] = reinterpret_cast<void*>(ip);
  } while (n < max && unw_step(&cursor) > 0);
  return n;
}
#else
// The fast path: libunwind caches each return address's frame layout (per thread, see unwind_init).
inline int backtrace_into(void** buf, int max) { return unw_backtrace(buf, max); }
#endif

}  // namespace

#if defined(__SANITIZE_THREAD__)
// libunwind frees its per-thread cache in a TSD destructor that locks a mutex after TSan has retired the thread
// (a crash inside TSan). Under TSan we take the global cache; our own locking, which TSan is here to check, is alike.
void unwind_init() { unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_GLOBAL); }
#else
void unwind_init() { unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD); }
#endif

void add_skip_range(uintptr_t lo, uintptr_t hi) {
  int n = g_range_count.load(std::memory_order_relaxed);
  for (int i = 0; i < n; ++i)
    if (g_ranges[i].lo == lo && g_ranges[i].hi == hi) return;
  if (n >= kMaxRanges) return;
  g_ranges[n] = {lo, hi};
  g_range_count.store(n + 1, std::memory_order_release);
}

void add_skip_module_of(const void* address) {
  const auto a = reinterpret_cast<uintptr_t>(address);
  add_modules([a](dl_phdr_info* info) {
    for (int i = 0; i < info->dlpi_phnum; ++i) {
      const auto& ph = info->dlpi_phdr[i];
      const uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
      if (ph.p_type == PT_LOAD && a >= lo && a < lo + ph.p_memsz) return true;
    }
    return false;
  });
}

void add_skip_modules_named(const char* name_part) {
  add_modules([name_part](dl_phdr_info* info) {
    return info->dlpi_name && std::strstr(info->dlpi_name, name_part) != nullptr;
  });
}

namespace {
std::atomic<bool> g_unwind_off{false};
}  // namespace

void unwind_off_after_fork() { g_unwind_off.store(true, std::memory_order_relaxed); }

__attribute__((noinline)) int capture_stack(uintptr_t* out, int max, int skip) {
  if (max <= 0 || g_unwind_off.load(std::memory_order_relaxed)) return 0;
  constexpr int kBuf = 256;
  void* buf[kBuf];
  int want = max + skip + 1;
  // Leading frames in skipped modules (driver, CUPTI) are not known in advance: unwind generously.
  want = want + 16 > kBuf ? kBuf : want + 16;
  const int n = backtrace_into(buf, want);
  int i = 1 + skip;  // buf[0] is this function
  while (i < n && in_skip_range(reinterpret_cast<uintptr_t>(buf[i]))) ++i;
  int k = 0;
  for (; i < n && k < max; ++i) out[k++] = reinterpret_cast<uintptr_t>(buf[i]);
  return k;
}

}  // namespace allocscope::capture
