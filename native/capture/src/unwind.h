// The unwinder behind a tiny interface: return addresses of the calling thread, innermost first.
#pragma once

#include <cstdint>

namespace allocscope::capture {

// Call once before capturing (selects libunwind's per-thread cache).
void unwind_init();

// Writes up to `max` return addresses into `out`, innermost first, dropping this function, `skip` frames of the
// caller's own, and then every leading frame inside a range registered with add_skip_range (our library, the
// driver, CUPTI). Allocates nothing and takes no lock of ours. Returns the count.
int capture_stack(uintptr_t* out, int max, int skip);

// In a forked child: libunwind's own locks may have been held by parent threads that do not exist here (the child
// then hangs in its first unwind), so a child records no native frames (Python frames need no unwinder).
void unwind_off_after_fork();

// Address ranges whose leading frames are dropped (at most 16; set at start, before any capture).
void add_skip_range(uintptr_t lo, uintptr_t hi);
// Registers every executable segment of the loaded module that contains `address`.
void add_skip_module_of(const void* address);
// Registers every executable segment of loaded modules whose path contains `name_part` (e.g. "libcuda.so").
void add_skip_modules_named(const char* name_part);

}  // namespace allocscope::capture
