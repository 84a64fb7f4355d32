// OOM analysis: the allocator state just before each `oom` event (from the checkpointed state index), its largest
// free block, and the largest live allocations.
#include "allocscope/oom.h"

#include <algorithm>

#include "allocscope/allocator_state.h"
#include "allocscope/segment_timeline.h"

namespace allocscope {

std::vector<OomReport> analyze_ooms(const Snapshot& s, const Lifetimes& lifetimes, uint32_t top) {
  std::vector<OomReport> out;
  const EventColumns& ev = s.events;
  for (const DeviceLifetimes& lt : lifetimes.devices) {
    std::vector<uint32_t> events;
    for (uint32_t i = 0; i < lt.event_count; ++i)
      if (ev.action[lt.event_begin + i] == Action::kOom) events.push_back(i);
    if (events.empty()) continue;
    // The state index is only built for devices that failed: most snapshots have no oom at all.
    const SegmentTimeline st = build_segment_timeline(s, lt.device);
    const AllocatorStateIndex index(s, lt, st);
    AllocatorState state;
    for (uint32_t e : events) {
      const uint32_t r = lt.event_begin + e;
      OomReport o;
      o.device = lt.device;
      o.event = e;
      o.time_us = ev.time_us[r];
      o.requested = ev.size[r];
      o.device_free = ev.addr[r];
      index.at(e, &state);  // step e: after the e events before the oom
      o.reserved = state.reserved_bytes;
      o.allocated = state.allocated_bytes;
      o.requested_live = state.requested_bytes;
      o.cached_free = o.reserved > o.allocated ? o.reserved - o.allocated : 0;
      o.live_allocations = static_cast<uint32_t>(state.block_addr.size());
      // Gaps between a segment's active blocks (both in address order) are its free blocks.
      for (size_t k = 0; k < state.segment_addr.size(); ++k) {
        uint64_t cursor = state.segment_addr[k];
        const uint64_t seg_end = state.segment_addr[k] + state.segment_size[k];
        const uint32_t b0 = state.segment_first_block[k], b1 = b0 + state.segment_num_blocks[k];
        for (uint32_t b = b0; b < b1; ++b) {
          if (state.block_addr[b] > cursor) o.largest_free_block = std::max(o.largest_free_block, state.block_addr[b] - cursor);
          cursor = std::max(cursor, state.block_addr[b] + state.block_size[b]);
        }
        if (seg_end > cursor) o.largest_free_block = std::max(o.largest_free_block, seg_end - cursor);
      }
      o.fragmentation = o.cached_free >= o.requested && o.largest_free_block < o.requested;
      std::vector<uint32_t> alive;
      for (uint32_t i = 0; i < lt.count(); ++i)
        if (lt.alive_at(i, e)) alive.push_back(i);
      const size_t n = std::min<size_t>(top, alive.size());
      std::partial_sort(alive.begin(), alive.begin() + n, alive.end(), [&](uint32_t a, uint32_t b) {
        return lt.size[a] != lt.size[b] ? lt.size[a] > lt.size[b] : a < b;
      });
      o.top_rows.assign(alive.begin(), alive.begin() + n);
      out.push_back(std::move(o));
    }
  }
  return out;
}

}  // namespace allocscope
