// The one rule that gives PyTorch's frameless entries a line: an allocation made on a thread that runs no Python (the
// autograd engine's, NCCL's) while a Python call waited for it (a backward(), a collective) belongs to that call's line.
//
// PyTorch's recorder writes no frames for blocks its autograd threads allocate, so in a snapshot the largest blocks
// at a backward peak (gradients) read "<no frames>". `allocscope record`'s bootstrap wraps those calls; the capture
// records each call's time span and the waiting thread's Python frames (LentWindow, key 'allocscope_lent'), and the
// loader applies them here, so every answer (sites, peak, leaks, the viewer) reads the call's line.
#pragma once

#include <cstdint>
#include <span>

#include "allocscope/snapshot.h"

namespace allocscope {

// Whether stack `id` holds a Python frame: a file ending in ".py" or a pseudo-file "<...>" (co_filename of <string>,
// <frozen runpy>, a notebook cell). PyTorch's C++ frames (stacks="all") and a capture's native frames are not.
bool has_python_frame(const Snapshot& s, StackId id);

// How far outside a window an entry may lie and still be in it. Both recorders stamp wall-clock microseconds
// (CLOCK_REALTIME), but PyTorch converts its stamps from the TSC by a line fitted between two readings of
// std::chrono::system_clock (c10/util/ApproximateClock.cpp), so its times may be off the capture's by a few
// microseconds; an engine allocation is made well inside the call that waits for it, so a millisecond is ample.
constexpr int64_t kLentSlackUs = 1000;

struct LentCount {
  uint64_t rows = 0;      // trace entries that got a window's frames
  uint64_t blocks = 0;    // blocks of the final segments, through the entry that allocated them
  uint64_t segments = 0;  // segments, through the segment_alloc that made them
};

// Every trace entry of `s` whose stack holds no Python frame and whose time lies in a window ([start_us, end_us],
// widened by kLentSlackUs) gets its stack followed by that window's frames (outer to its own, as the capture places
// lent frames). Of several windows holding it, the newest lends (the latest start; at equal starts the later in
// `windows`), as the capture lends the newest loan: a backward() nested in another one (reentrant checkpointing)
// lends while it runs. A live block or segment whose allocating entry (the last alloc or segment_alloc at its
// address, not freed since) was lent, and whose frames were that entry's, gets the same stack. Devices whose trace
// records no times (PyTorch 2.0, 2.1) are left alone, as are windows ending before they start and stacks not in `s`.
// Each stack made is listed in Snapshot::lent_stacks with the stack it replaced. Work: O((n + w) log(n + w)) for n
// frameless entries and w windows.
LentCount lend_window_frames(Snapshot* s, std::span<const LentWindow> windows);

}  // namespace allocscope
