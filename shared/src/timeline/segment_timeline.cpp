// Builds the reserved-memory bands of one device by a forward pass over segment events with an interval map of the
// ranges mapped so far, then the final segments for ranges mapped before the window (rules in segment_timeline.h).
#include "allocscope/segment_timeline.h"
#include "analysis/step_totals.h"

#include <algorithm>
#include <map>

namespace allocscope {

namespace {

struct Band {
  uint64_t addr, size;
  int64_t stream;
  StackId stack;
  uint32_t map_event, unmap_event;
  uint8_t expandable;
};

}  // namespace

SegmentTimeline build_segment_timeline(const Snapshot& s, int64_t device) {
  SegmentTimeline out;
  out.device = device;
  const DeviceTrace* trace = s.device(device);
  const uint32_t begin = trace ? trace->begin : 0;
  const uint32_t n = trace ? trace->count() : 0;
  out.event_begin = begin;
  out.event_count = n;
  const EventColumns& ev = s.events;

  std::vector<Band> traced;            // in the order they start
  std::vector<Band> before;            // mapped before the window, in the order we learn of them
  std::map<uint64_t, uint32_t> live;   // start address -> index in `traced` of a band mapped now

  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t r = begin + i;
    const Action act = ev.action[r];
    const uint64_t a = ev.addr[r], e = ev.addr[r] + ev.size[r];
    if ((act == Action::kSegmentAlloc || act == Action::kSegmentMap) && a == e) continue;  // nothing mapped
    if (act == Action::kSegmentAlloc || act == Action::kSegmentMap) {
      auto next = live.lower_bound(a);
      bool overlap = next != live.end() && next->first < e;
      if (next != live.begin()) {
        const Band& prev = traced[std::prev(next)->second];
        overlap |= prev.addr + prev.size > a;
      }
      if (overlap) out.warnings.push_back("event " + std::to_string(i) + ": segment range mapped twice");
      live[a] = static_cast<uint32_t>(traced.size());
      traced.push_back({a, ev.size[r], ev.stream[r], ev.stack[r], i, kNoEvent,
                        static_cast<uint8_t>(act == Action::kSegmentMap)});
      continue;
    }
    if (act != Action::kSegmentFree && act != Action::kSegmentUnmap) continue;
    if (a == e) {  // an empty range would split the band around it for nothing
      out.warnings.push_back("event " + std::to_string(i) + ": segment release of 0 bytes ignored");
      continue;
    }
    const uint8_t expandable = act == Action::kSegmentUnmap;
    auto it = live.upper_bound(a);
    if (it != live.begin()) {
      auto p = std::prev(it);
      if (traced[p->second].addr + traced[p->second].size > a) it = p;
    }
    uint64_t cursor = a;  // bytes of [a, e) below it are accounted for
    std::vector<Band> rest;
    while (it != live.end() && it->first < e) {
      Band& b = traced[it->second];
      const uint64_t b0 = b.addr, b1 = b.addr + b.size;
      if (b0 > cursor) before.push_back({cursor, b0 - cursor, ev.stream[r], ev.stack[r], kNoEvent, i, expandable});
      b.unmap_event = i;
      if (b0 < a) rest.push_back({b0, a - b0, b.stream, b.stack, i, kNoEvent, b.expandable});
      if (b1 > e) rest.push_back({e, b1 - e, b.stream, b.stack, i, kNoEvent, b.expandable});
      cursor = std::max(cursor, b1);
      it = live.erase(it);
    }
    if (cursor < e) before.push_back({cursor, e - cursor, ev.stream[r], ev.stack[r], kNoEvent, i, expandable});
    for (const Band& b : rest) {
      live[b.addr] = static_cast<uint32_t>(traced.size());
      traced.push_back(b);
    }
  }

  // Final segments: whatever no live band covers was mapped before the window and is still mapped.
  for (const Segment& seg : s.segments) {
    if (seg.device != device) continue;
    const uint64_t a = seg.address, e = seg.address + seg.total_size;
    auto it = live.upper_bound(a);
    if (it != live.begin()) {
      auto p = std::prev(it);
      if (traced[p->second].addr + traced[p->second].size > a) it = p;
    }
    uint64_t cursor = a;
    for (; it != live.end() && it->first < e; ++it) {
      const Band& b = traced[it->second];
      if (b.addr > cursor)
        before.push_back({cursor, b.addr - cursor, seg.stream, seg.stack, kNoEvent, kNoEvent, seg.is_expandable});
      cursor = std::max(cursor, b.addr + b.size);
    }
    if (cursor < e) before.push_back({cursor, e - cursor, seg.stream, seg.stack, kNoEvent, kNoEvent, seg.is_expandable});
  }

  // Stacking like PyTorch's segment timeline: pre-window bands (reversed discovery order) at the bottom.
  auto emit = [&](const Band& b) {
    out.addr.push_back(b.addr);
    out.size.push_back(b.size);
    out.stream.push_back(b.stream);
    out.stack.push_back(b.stack);
    out.map_event.push_back(b.map_event);
    out.unmap_event.push_back(b.unmap_event);
    out.expandable.push_back(b.expandable);
  };
  for (auto it = before.rbegin(); it != before.rend(); ++it) emit(*it);
  for (const Band& b : traced) emit(b);

  out.total = detail::step_totals(out, n);
  return out;
}

StackedTimeline layout_segments(const SegmentTimeline& st, uint32_t checkpoint_interval) {
  const uint32_t n = st.count();
  std::vector<uint32_t> birth(n), death(n);
  for (uint32_t i = 0; i < n; ++i) {
    birth[i] = st.birth_step(i);
    death[i] = st.death_step(i);
  }
  return StackedTimeline(std::move(birth), std::move(death), st.size, st.steps(), checkpoint_interval);
}

}  // namespace allocscope
