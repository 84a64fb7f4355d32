// Turns a frozen recorder state into the shared Snapshot model: symbolizes each distinct address once, interns frames
// and stacks, groups the trace by device, and lists live allocations as segments with one active block each.
#pragma once

#include "allocscope/snapshot.h"
#include "recorder.h"

namespace allocscope::capture {

struct BuildStats {
  uint64_t distinct_addresses = 0;
  uint64_t distinct_frames = 0;
};

Snapshot build_snapshot(const Frozen& frozen, BuildStats* stats = nullptr);

}  // namespace allocscope::capture
