// Consistency checks of a snapshot's content: each kind of problem becomes one counted warning, nothing aborts. (The
// loader counts negative trace sizes too; here they are among the sizes of 2^63 or more they read as.)
#include <algorithm>
#include <string>
#include <vector>

#include "allocscope/summary.h"
#include "analysis/addr_map.h"

namespace allocscope {

namespace {

void add(std::vector<std::string>* out, uint64_t n, const std::string& what) {
  if (n) out->push_back("file: " + std::to_string(n) + " " + what);
}

// Frees of an address whose last alloc or free before them was a free: by a replay of every address ever seen.
uint64_t repeated_frees_by_replay(const EventColumns& ev, const DeviceTrace& d) {
  uint64_t n = 0;
  detail::AddrMap state(1024);  // last action per address: 1 = alloc, 2 = free_completed
  for (uint32_t r = d.begin; r < d.end; ++r) {
    if (ev.action[r] == Action::kAlloc) {
      state.put(ev.addr[r], 1);
    } else if (ev.action[r] == Action::kFreeCompleted) {
      n += state.get(ev.addr[r]) == 2;
      state.put(ev.addr[r], 2);
    }
  }
  return n;
}

// The same count from the lifetimes, which replayed the trace already (a map of every address ever seen took 15 ms
// of a 1M-event `summary`). A repeated free finds no live alloc, so it is a freed-only row. A freed-only row's free
// is a repeated one exactly when an earlier free_completed hit its address: had the last alloc or free there been an
// alloc, that alloc would still be live and the free would have ended it. Only the few freed-only rows' addresses
// are looked up, in one pass over the rows' free events.
uint64_t repeated_frees_of(const DeviceLifetimes& lt) {
  // Freed-only rows stack first, with the final-state ones, before every traced row.
  const uint32_t none = std::min<uint32_t>(lt.event_count, detail::AddrMap::kAbsent - 2);  // after every event
  detail::AddrMap first_free(64);  // a freed-only row's address -> its earliest free_completed
  uint32_t front = 0;
  bool any = false;
  for (; front < lt.count() && lt.origin[front] != LifetimeOrigin::kTraced; ++front)
    if (lt.origin[front] == LifetimeOrigin::kFreedOnly) first_free.put(lt.addr[front], none), any = true;
  if (!any) return 0;
  for (uint32_t i = 0; i < lt.count(); ++i) {
    if (lt.free_event[i] == kNoEvent) continue;
    const uint32_t f = first_free.get(lt.addr[i]);
    if (f != detail::AddrMap::kAbsent && lt.free_event[i] < f) first_free.put(lt.addr[i], lt.free_event[i]);
  }
  uint64_t n = 0;
  for (uint32_t i = 0; i < front; ++i)
    n += lt.origin[i] == LifetimeOrigin::kFreedOnly && first_free.get(lt.addr[i]) < lt.free_event[i];
  return n;
}

}  // namespace

std::vector<std::string> consistency_warnings(const Snapshot& s, const Lifetimes& lifetimes,
                                              std::vector<std::pair<int64_t, uint64_t>>* repeated_frees) {
  std::vector<std::string> out;
  uint64_t outside = 0, huge = 0, overlapping = 0, untiled = 0;
  for (const Segment& seg : s.segments) {
    const unsigned __int128 seg_end = static_cast<unsigned __int128>(seg.address) + seg.total_size;
    unsigned __int128 prev_end = seg.address, tiled = 0;
    for (const Block& b : s.blocks_of(seg)) {
      tiled += b.size;
      const unsigned __int128 end = static_cast<unsigned __int128>(b.address) + b.size;
      if (b.address < seg.address || end > seg_end) ++outside;
      if (b.address < prev_end && b.address >= seg.address) ++overlapping;
      if (end > prev_end) prev_end = end;
      if (b.size >> 63 || b.requested_size >> 63) ++huge;
    }
    if (seg.total_size >> 63) ++huge;
    // PyTorch splits a segment into blocks that cover it exactly; when they do not, the file's final state (every
    // "at the end" figure, and the pre-trace allocations the timeline starts from) is not what the allocator held.
    untiled += seg.num_blocks && tiled != seg.total_size;
  }
  add(&out, outside, "block(s) lie outside their segment's address range");
  add(&out, overlapping, "block(s) overlap the previous block of their segment");
  add(&out, huge, "segment/block size(s) are negative or above 2^63 bytes");
  add(&out, untiled, "segment(s) whose blocks do not add up to the segment's size (PyTorch's blocks always cover "
                     "their segment exactly): the final allocated and free bytes are not the allocator's");

  const EventColumns& ev = s.events;
  for (const DeviceTrace& d : s.devices) {
    uint64_t backwards = 0, seg_double_free = 0, huge_events = 0;
    // Each column in a loop of its own over plain pointers: the compiler vectorizes them (one loop reloading the
    // columns after every counter store took 7.8 ms on 1M events).
    const int64_t* const time = ev.time_us.data();
    const uint64_t* const size = ev.size.data();
    const Action* const action = ev.action.data();
    for (uint32_t r = d.begin + 1; r < d.end; ++r) backwards += time[r] < time[r - 1];
    // An oom entry keeps the driver's free bytes in addr, not a size to check; its size is the request.
    for (uint32_t r = d.begin; r < d.end; ++r) huge_events += size[r] >> 63;
    detail::AddrMap segs(64);  // last action per segment address: 1 = segment_alloc, 2 = segment_free
    for (uint32_t r = d.begin; r < d.end; ++r) {
      if (action[r] == Action::kSegmentAlloc) {
        segs.put(ev.addr[r], 1);
      } else if (action[r] == Action::kSegmentFree) {
        if (segs.get(ev.addr[r]) == 2) ++seg_double_free;
        segs.put(ev.addr[r], 2);
      }
    }
    // A second free of an address the trace already freed cannot be explained by the ring buffer (which only drops
    // the oldest events).
    const DeviceLifetimes* lt = lifetimes.device(d.device);
    const uint64_t double_free = lt && lt->event_begin == d.begin && lt->event_count == d.count()
                                     ? repeated_frees_of(*lt)
                                     : repeated_frees_by_replay(ev, d);
    add(&out, backwards, "event(s) on device " + std::to_string(d.device) +
                             " have a time earlier than the event before (threads recorded out of order, or clock jumps)");
    if (repeated_frees) repeated_frees->emplace_back(d.device, double_free);
    add(&out, double_free, "free(s) on device " + std::to_string(d.device) +
                               " of an address the trace had already freed (frees of unknown addresses)");
    add(&out, seg_double_free, "segment_free(s) on device " + std::to_string(d.device) +
                                   " of a segment the trace had already freed");
    add(&out, huge_events, "event(s) on device " + std::to_string(d.device) +
                               " with a size of 2^63 bytes or more, or negative: peaks that add them mean nothing");
  }
  return out;
}

}  // namespace allocscope
