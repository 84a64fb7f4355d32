// Active cached memory (reserved segments) per device over steps, correct for expandable segments: one band per
// mapped address range, laid out by the same StackedTimeline as the active-memory view.
//
// Rules (docs/timeline.md): `segment_alloc` / `segment_map` start a band for [addr, addr + size). `segment_free` /
// `segment_unmap` end every band overlapping their range; parts of an overlapped band outside the range continue as
// new bands (on top, from that step: expandable segments shrink by unmapping their tail). Parts of the range no band
// covers were mapped before the trace window: they become bands alive from step 0. At the end, final `segments`
// ranges no live band covers were mapped before the window and never released: bands alive throughout. For files
// without expandable segments this is PyTorch's "Active Cached Segment Timeline" (segment_alloc/segment_free pairs).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "allocscope/lifetimes.h"
#include "allocscope/snapshot.h"
#include "allocscope/timeline.h"

namespace allocscope {

struct SegmentTimeline {
  int64_t device = 0;
  uint32_t event_begin = 0;
  uint32_t event_count = 0;

  // Per band, in stacking order (pre-trace bands first, then by the step they start).
  std::vector<uint64_t> addr;
  std::vector<uint64_t> size;
  std::vector<int64_t> stream;
  std::vector<StackId> stack;
  std::vector<uint32_t> map_event;    // segment_alloc / segment_map / the unmap that split it; kNoEvent: before trace
  std::vector<uint32_t> unmap_event;  // segment_free / segment_unmap; kNoEvent: still mapped at the end
  std::vector<uint8_t> expandable;    // 1 when it belongs to an expandable segment (map/unmap, or is_expandable)

  std::vector<uint64_t> total;  // per step (n + 1): reserved bytes
  std::vector<std::string> warnings;

  uint32_t count() const { return static_cast<uint32_t>(addr.size()); }
  uint32_t steps() const { return event_count + 1; }
  uint32_t birth_step(uint32_t i) const { return map_event[i] == kNoEvent ? 0 : map_event[i] + 1; }
  uint32_t death_step(uint32_t i) const { return unmap_event[i] == kNoEvent ? event_count + 1 : unmap_event[i] + 1; }
};

SegmentTimeline build_segment_timeline(const Snapshot& snapshot, int64_t device);

// The stacked layout of the bands (same queries as the active-memory timeline; rows are band indices).
StackedTimeline layout_segments(const SegmentTimeline& st, uint32_t checkpoint_interval = 1024);

}  // namespace allocscope
