// The command-line tool's memory policy: memory the process freed is reused for its next buffers instead of being
// given back to the kernel and faulted in again, and the heap pages a load is about to use are faulted in by the
// thread that reads the file, not by the parser. Neither changes a byte of any answer.
//
// Why reuse: a 1M-event `summary` parses into ~80 MB of fresh buffers (event columns, the pickle memo, read chunks),
// frees the memo and the chunks, then builds lifetimes and per-step totals (~35 MB). glibc gave each large buffer a
// mapping of its own and unmapped it on free, so the analyses after the parse faulted in ~9,000 new pages the parse
// had just returned (tests/bench/RESULTS.md, "The CLI's memory policy"). With malloc's mmap threshold at its 32 MB
// maximum and the heap not trimmed, they reuse them. A run is one command, so nothing is held past the process.
//
// Why prefault: even so, the parse's first touch of ~80 MB of heap cost the parsing thread ~25-30 ms of page faults
// (~15% of its time), while the thread reading the file ahead of it waits for it most of the time. The heap now
// grows 16 MB ahead of what malloc hands out (M_TOP_PAD), and that reading thread, whenever its read-ahead is full,
// asks the kernel to map the pages between what it has done and the heap's end (MADV_POPULATE_WRITE, Linux 5.14).
// That call maps zeroed pages where none are yet and leaves mapped ones alone, so running it beside the parser
// changes nothing the parser could see. What it maps that the parse would not have touched: up to 16 MB past the
// heap's use, and the event columns' spare capacity where they live in this heap (each under 32 MB). The columns
// are reserved from the file's size at ~150 bytes of pickle per event; PyTorch's files run ~160, so that is a few
// MB, but a file of mostly segments and few events gets up to ~30% of its size resident for nothing.
//
// 2 MB pages (MADV_HUGEPAGE on 2 MB-aligned buffers) were tried here and dropped: on a VM whose balloon reports
// free memory to the host, a fresh 2 MB page is one the host must fault in again, and a run after a few idle
// seconds took 0.29-0.38 s against 0.23 s in 4 KB pages (measured the same minutes, RESULTS.md).
//
// Only this executable: the capture library is loaded into other people's processes and must not change their
// allocator. Sanitizer builds keep their own allocator.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>

#include "cli_common.h"

#if defined(__GLIBC__) && defined(__linux__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define ALLOCSCOPE_MEMORY_POLICY 1
#include <malloc.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#ifndef MADV_POPULATE_WRITE  // glibc before 2.35 lacks the name; kernels before 5.14 refuse the call (EINVAL)
#define MADV_POPULATE_WRITE 23
#endif
#else
#define ALLOCSCOPE_MEMORY_POLICY 0
#endif

namespace allocscope::cli {

#if ALLOCSCOPE_MEMORY_POLICY
namespace {

constexpr size_t kHeapAhead = 16u << 20;

// Set before main() runs. All three are glibc's documented knobs (mallopt(3)); 32 MB is M_MMAP_THRESHOLD's largest
// value on 64-bit systems (larger buffers, a 10M-event trace's columns, still get mappings of their own).
const bool kMemoryPolicy = [] {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, kHeapAhead);
  return true;
}();

// The heap's end, from the kernel (glibc's cached copy belongs to the thread that moves it). brk takes the
// address space's write lock, which the parser's page faults wait for: asked only when the last answer is used up.
uintptr_t heap_end() { return static_cast<uintptr_t>(::syscall(SYS_brk, 0)) & ~uintptr_t{4095}; }

}  // namespace

std::function<bool()> heap_prefault() {
  struct Progress {
    uintptr_t done, end;
  };
  const uintptr_t start = heap_end();
  auto p = std::make_shared<Progress>(Progress{start, start});
  return [p] {
    if (p->done >= p->end && (p->end = heap_end()) <= p->done) return false;
    // ~60 us a call. The predecoder calls this when its ring of 1,024 decoded entries is full, ~130 us of the
    // parser's work: 1 MB a call (~0.4 ms) let the parser drain the ring and decode 6-7% of the entries itself.
    const uintptr_t n = std::min<uintptr_t>(p->end - p->done, 1u << 17);
    if (::madvise(reinterpret_cast<void*>(p->done), n, MADV_POPULATE_WRITE) != 0) {
      p->done = p->end = UINTPTR_MAX;  // a kernel before 5.14, or a heap trimmed under us: the parser faults in
      return false;                    // its pages itself
    }
    p->done += n;
    return true;
  };
}

#else

std::function<bool()> heap_prefault() { return {}; }

#endif

}  // namespace allocscope::cli
