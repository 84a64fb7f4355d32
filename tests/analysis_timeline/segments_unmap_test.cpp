// Expandable segments that unmap part of what they mapped: no fixture does (PyTorch 2.11 only grew in our runs), so
// this builds the model directly from the events such a trace would hold.
#include <gtest/gtest.h>

#include "allocscope/allocator_state.h"
#include "allocscope/segment_timeline.h"

namespace allocscope {
namespace {

void event(Snapshot* s, Action a, uint64_t addr, uint64_t size) {
  EventColumns& e = s->events;
  e.action.push_back(a);
  e.addr.push_back(addr);
  e.size.push_back(size);
  e.stream.push_back(0);
  e.time_us.push_back(static_cast<int64_t>(e.action.size()));
  e.stack.push_back(0);
  e.compile_context.push_back(0);
  e.user_metadata.push_back(0);
}

void segment(Snapshot* s, uint64_t addr, uint64_t size, bool expandable) {
  Segment seg;
  seg.address = addr;
  seg.total_size = size;
  seg.is_expandable = expandable;
  seg.first_block = static_cast<uint32_t>(s->blocks.size());
  s->segments.push_back(seg);
}

Snapshot partial_unmaps() {
  Snapshot s;
  event(&s, Action::kSegmentMap, 0x1000, 0x100);
  event(&s, Action::kSegmentMap, 0x1100, 0x100);
  event(&s, Action::kSegmentUnmap, 0x1080, 0x100);  // the middle of two mappings: both shrink
  event(&s, Action::kSegmentUnmap, 0x5000, 0x40);   // mapped before the window
  event(&s, Action::kSegmentAlloc, 0x9000, 0x200);
  s.devices.push_back({0, 0, 5});
  s.has_device_traces = true;
  segment(&s, 0x1000, 0x80, true);
  segment(&s, 0x1180, 0x80, true);
  segment(&s, 0x7000, 0x100, false);  // allocated before the window, still there
  segment(&s, 0x9000, 0x200, false);
  return s;
}

TEST(SegmentTimeline, PartialUnmapSplitsBands) {
  const Snapshot s = partial_unmaps();
  const SegmentTimeline st = build_segment_timeline(s, 0);
  EXPECT_TRUE(st.warnings.empty());
  EXPECT_EQ(st.total, (std::vector<uint64_t>{0x140, 0x240, 0x340, 0x240, 0x200, 0x400}));
  // Pre-window bands (the 0x7000 segment, the 0x5000 range) at the bottom, then the two maps, the two remainders
  // of the split and the segment_alloc.
  ASSERT_EQ(st.count(), 7u);
  EXPECT_EQ(st.addr[0], 0x7000u);
  EXPECT_EQ(st.addr[1], 0x5000u);
  EXPECT_EQ(st.unmap_event[1], 3u);
  EXPECT_EQ(st.addr[4], 0x1000u);
  EXPECT_EQ(st.size[4], 0x80u);
  EXPECT_EQ(st.map_event[4], 2u);
  EXPECT_EQ(st.addr[5], 0x1180u);
  EXPECT_EQ(st.size[5], 0x80u);
}

TEST(AllocatorState, ExpandableRangesMergeLikePyTorch) {
  const Snapshot s = partial_unmaps();
  const DeviceLifetimes lt = build_device_lifetimes(s, 0);
  const SegmentTimeline st = build_segment_timeline(s, 0);
  const AllocatorStateIndex idx(s, lt, st, 2);
  AllocatorState a;
  idx.at(2, &a);  // both maps done: one expandable segment of 0x200 bytes
  ASSERT_EQ(a.segment_addr, (std::vector<uint64_t>{0x1000, 0x5000, 0x7000}));
  EXPECT_EQ(a.segment_size, (std::vector<uint64_t>{0x200, 0x40, 0x100}));
  idx.at(5, &a);  // the end: the file's segments
  EXPECT_EQ(a.segment_addr, (std::vector<uint64_t>{0x1000, 0x1180, 0x7000, 0x9000}));
  EXPECT_EQ(a.segment_size, (std::vector<uint64_t>{0x80, 0x80, 0x100, 0x200}));
  EXPECT_EQ(a.reserved_bytes, 0x400u);
}

}  // namespace
}  // namespace allocscope
