// The command-line tool's operator new: a buffer of 2 MB or more gets 2 MB-aligned memory the kernel may back with
// 2 MB pages (Linux transparent huge pages in "madvise" mode, Debian's default).
//
// Why: a 1M-event `summary` writes ~100 MB of fresh buffers once each: event columns, the pickle memo, lifetimes,
// per-step totals, read chunks. In 4 KB pages that is ~23,000 page faults, each zeroing a page and taking the
// memory cgroup's and the LRU's locks, ~15% of the parser thread's time (perf, tests/bench/RESULTS.md "Large
// buffers in 2 MB pages"). A 2 MB page costs one fault for 512. glibc places a large buffer in a mapping of its
// own 16 bytes past a page boundary, never on a 2 MB one, so advice alone would leave each buffer's first and last
// 2 MB in small pages: hence the alignment here.
//
// Only this executable: the capture library is loaded into other people's processes and must not change their
// allocator, and the analyses' answers never depend on where a buffer lives. The rest goes to malloc; every
// pointer, aligned or not, goes back through free(), as glibc allows. Sanitizer builds keep their own operator new,
// whose new/delete mismatch checks matter more there than speed.
#include <cstdint>
#include <cstdlib>
#include <new>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ALLOCSCOPE_LARGE_PAGES 0
#else
#define ALLOCSCOPE_LARGE_PAGES 1
#endif

#if ALLOCSCOPE_LARGE_PAGES

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace {

constexpr std::size_t kLargePage = std::size_t{2} << 20;

void* allocate(std::size_t n) {
  if (n >= kLargePage && n <= SIZE_MAX - kLargePage) {
    const std::size_t rounded = (n + kLargePage - 1) & ~(kLargePage - 1);
    if (void* p = std::aligned_alloc(kLargePage, rounded)) {
#if defined(__linux__)
      ::madvise(p, rounded, MADV_HUGEPAGE);  // a hint: refused (THP off, an old kernel) it changes nothing
#endif
      return p;
    }
    return nullptr;
  }
  return std::malloc(n ? n : 1);
}

void* allocate_or_throw(std::size_t n) {
  for (;;) {
    if (void* p = allocate(n)) return p;
    const std::new_handler handler = std::get_new_handler();
    if (!handler) throw std::bad_alloc();
    handler();
  }
}

}  // namespace

void* operator new(std::size_t n) { return allocate_or_throw(n); }
void* operator new[](std::size_t n) { return allocate_or_throw(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return allocate_or_throw(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return allocate_or_throw(n);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

#endif  // ALLOCSCOPE_LARGE_PAGES
