// Builds per-device allocation lifetimes by one forward pass over the trace plus the final segments, mirroring
// PyTorch's `process_alloc_data` (see lifetimes.h for the rules).
#include "allocscope/lifetimes.h"
#include "analysis/step_totals.h"

#include <algorithm>

#include "analysis/addr_map.h"

namespace allocscope {

int64_t DeviceLifetimes::step_time_us(const Snapshot& s, uint32_t step) const {
  if (event_count == 0) return 0;
  uint32_t e = step == 0 ? 0 : std::min(step - 1, event_count - 1);
  return s.events.time_us[event_begin + e];
}

uint32_t DeviceLifetimes::peak_step() const {
  return static_cast<uint32_t>(std::max_element(total.begin(), total.end()) - total.begin());
}

const DeviceLifetimes* Lifetimes::device(int64_t ordinal) const {
  for (const auto& d : devices)
    if (d.device == ordinal) return &d;
  return nullptr;
}

namespace {

// One allocation while building, before rows are put in stacking order.
struct Row {
  uint64_t addr, size, block_size;
  int64_t stream;
  StackId stack;
  uint32_t alloc_event, free_event, free_requested_event;
  LifetimeOrigin origin;
};

}  // namespace

DeviceLifetimes build_device_lifetimes(const Snapshot& s, int64_t device) {
  DeviceLifetimes out;
  out.device = device;
  const DeviceTrace* trace = s.device(device);
  const uint32_t begin = trace ? trace->begin : 0;
  const uint32_t n = trace ? trace->count() : 0;
  out.event_begin = begin;
  out.event_count = n;
  const EventColumns& ev = s.events;

  std::vector<Row> traced;     // in alloc order
  std::vector<Row> freed_only;  // in free order
  {
    // One row per alloc event: sized once, since a doubling array of 56-byte rows for a 10M-event trace took up to
    // twice its 185 MB while it grew (and the browser's heap never gives that back).
    size_t allocs = 0;
    for (uint32_t i = 0; i < n; ++i) allocs += ev.action[begin + i] == Action::kAlloc;
    traced.reserve(allocs);
  }
  detail::AddrMap live(4096);   // addr -> index in `traced` of the live (not yet free_completed) alloc
  detail::AddrMap requested_before(64);  // addr -> free_requested event of a block whose alloc we never saw

  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t r = begin + i;
    const uint64_t addr = ev.addr[r];
    switch (ev.action[r]) {
      case Action::kAlloc: {
        uint32_t prev = live.get(addr);
        if (prev != detail::AddrMap::kAbsent)
          out.warnings.push_back("event " + std::to_string(i) + ": address allocated again without a free; the "
                                 "earlier allocation stays alive (as in PyTorch's viewer)");
        live.put(addr, static_cast<uint32_t>(traced.size()));
        traced.push_back({addr, ev.size[r], 0, ev.stream[r], ev.stack[r], i, kNoEvent, kNoEvent,
                          LifetimeOrigin::kTraced});
        break;
      }
      case Action::kFreeRequested: {
        uint32_t t = live.get(addr);
        if (t != detail::AddrMap::kAbsent) {
          traced[t].free_requested_event = i;
        } else {
          requested_before.put(addr, i);
        }
        break;
      }
      case Action::kFreeCompleted: {
        uint32_t t = live.erase(addr);
        if (t != detail::AddrMap::kAbsent) {
          traced[t].free_event = i;
          break;
        }
        // PyTorch elides an immediately preceding free_requested of the same address into one `free` event and keeps
        // that event's fields; otherwise the free_completed's own.
        uint32_t src = r;
        if (i > 0 && ev.action[r - 1] == Action::kFreeRequested && ev.addr[r - 1] == addr) src = r - 1;
        uint32_t req = requested_before.erase(addr);
        freed_only.push_back({addr, ev.size[src], 0, ev.stream[src], ev.stack[src], kNoEvent, i,
                              req == detail::AddrMap::kAbsent ? kNoEvent : req, LifetimeOrigin::kFreedOnly});
        break;
      }
      default:
        break;  // segment events, oom, snapshot: not part of the active-memory timeline
    }
  }

  // Final state: blocks still active. Traced allocs alive at the end learn their allocator block size here.
  std::vector<Row> final_state;
  for (const Segment& seg : s.segments) {
    if (seg.device != device) continue;
    for (const Block& b : s.blocks_of(seg)) {
      if (b.state != BlockState::kActiveAllocated && b.state != BlockState::kActivePendingFree) continue;
      uint32_t t = live.get(b.address);
      if (t != detail::AddrMap::kAbsent) {
        traced[t].block_size = b.size;
        continue;
      }
      // PyTorch adds only active_allocated blocks; a pending-free block with no traced alloc is not drawn.
      if (b.state != BlockState::kActiveAllocated) continue;
      final_state.push_back({b.address, b.requested_size, b.size, seg.stream, b.stack, kNoEvent, kNoEvent, kNoEvent,
                             LifetimeOrigin::kFinalState});
    }
  }

  // Stacking order: PyTorch pushes freed-only then final-state elements to `initially_allocated`, reverses it, and
  // stacks those first; traced allocs follow in event order.
  const size_t total_rows = final_state.size() + freed_only.size() + traced.size();
  out.addr.reserve(total_rows);
  out.size.reserve(total_rows);
  out.block_size.reserve(total_rows);
  out.stream.reserve(total_rows);
  out.stack.reserve(total_rows);
  out.alloc_event.reserve(total_rows);
  out.free_event.reserve(total_rows);
  out.free_requested_event.reserve(total_rows);
  out.origin.reserve(total_rows);
  auto emit = [&](const Row& x) {
    out.addr.push_back(x.addr);
    out.size.push_back(x.size);
    out.block_size.push_back(x.block_size);
    out.stream.push_back(x.stream);
    out.stack.push_back(x.stack);
    out.alloc_event.push_back(x.alloc_event);
    out.free_event.push_back(x.free_event);
    out.free_requested_event.push_back(x.free_requested_event);
    out.origin.push_back(x.origin);
  };
  for (auto it = final_state.rbegin(); it != final_state.rend(); ++it) emit(*it);
  for (auto it = freed_only.rbegin(); it != freed_only.rend(); ++it) emit(*it);
  for (const Row& x : traced) emit(x);

  out.total = detail::step_totals(out, n);
  return out;
}

Lifetimes build_lifetimes(const Snapshot& s) {
  // PyTorch offers a device when its trace has events or it has segments.
  std::vector<int64_t> ordinals;
  for (const DeviceTrace& d : s.devices)
    if (d.count() > 0) ordinals.push_back(d.device);
  for (const Segment& seg : s.segments) ordinals.push_back(seg.device);
  std::sort(ordinals.begin(), ordinals.end());
  ordinals.erase(std::unique(ordinals.begin(), ordinals.end()), ordinals.end());
  Lifetimes out;
  for (int64_t d : ordinals) out.devices.push_back(build_device_lifetimes(s, d));
  return out;
}

MemoryVizSummary memoryviz_summary(const DeviceLifetimes& lt, bool with_totals) {
  MemoryVizSummary m;
  m.allocations = lt.count();
  const uint32_t n = lt.event_count;
  // Which events are PyTorch "actions": +1 an alloc (records the total after it), +2 a free (records the total
  // before it, repeated for its animation steps).
  std::vector<uint8_t> kind(n, 0);
  bool any_action = false;
  for (uint32_t i = 0; i < lt.count(); ++i) {
    if (lt.alloc_event[i] != kNoEvent) kind[lt.alloc_event[i]] = 1, any_action = true;
    if (lt.free_event[i] != kNoEvent) kind[lt.free_event[i]] = 2, any_action = true;
  }
  if (!any_action) {
    // PyTorch then turns one pre-existing allocation into an action so the flat graph still shows.
    if (lt.count() > 0) {
      m.peak_active_bytes = m.final_active_bytes = lt.total[0];
      if (with_totals) m.distinct_totals.push_back(lt.total[0]);
    }
    return m;
  }
  bool have_last = false;
  uint64_t last = 0;
  for (uint32_t e = 0; e < n; ++e) {
    if (!kind[e]) continue;
    const uint64_t after = lt.total[e + 1];
    const uint64_t recorded = kind[e] == 1 ? after : lt.total[e];
    m.peak_active_bytes = std::max(m.peak_active_bytes, after);
    if (!have_last || recorded != last) {
      if (with_totals) m.distinct_totals.push_back(recorded);
      last = recorded;
      have_last = true;
    }
  }
  m.final_active_bytes = last;
  return m;
}

}  // namespace allocscope
