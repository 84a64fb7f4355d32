// The command-line tool's memory policy: memory the process freed is reused for its next buffers instead of being
// given back to the kernel and faulted in again. It changes no byte of any answer.
//
// Why: a 1M-event `summary` parses into ~80 MB of fresh buffers (event columns, the pickle memo, read chunks), frees
// the memo and the chunks, then builds lifetimes and per-step totals (~35 MB). glibc gave each large buffer a
// mapping of its own and unmapped it on free, so the analyses after the parse faulted in ~9,000 new pages the parse
// had just returned (tests/bench/RESULTS.md, "The CLI's memory policy"). With malloc's mmap threshold at its 32 MB
// maximum and the heap not trimmed, they reuse them. A run is one command, so nothing is held past the process.
//
// 2 MB pages (MADV_HUGEPAGE on 2 MB-aligned buffers) were tried here and dropped: on a VM whose balloon reports
// free memory to the host, a fresh 2 MB page is one the host must fault in again, and a run after a few idle
// seconds took 0.29-0.38 s against 0.23 s in 4 KB pages (measured the same minutes, RESULTS.md).
//
// Only this executable: the capture library is loaded into other people's processes and must not change their
// allocator. Sanitizer builds keep their own allocator.
#include <cstdlib>

#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#include <malloc.h>

namespace {

// Set before main() runs. Both are glibc's documented knobs (mallopt(3)); 32 MB is M_MMAP_THRESHOLD's largest value
// on 64-bit systems (larger buffers, a 10M-event trace's columns, still get mappings of their own).
const bool kReuseFreedMemory = [] {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  return true;
}();

}  // namespace

#endif
