// Builds per-device allocation lifetimes by one forward pass over the trace plus the final segments, mirroring
// PyTorch's `process_alloc_data` (see lifetimes.h for the rules).
#include "allocscope/lifetimes.h"
#include "allocscope/threads.h"

#include <algorithm>

#include "analysis/addr_map.h"
#include "analysis/lifetimes_parts.h"
#include "analysis/step_totals.h"
#include "util/parallel.h"

namespace allocscope {

int64_t DeviceLifetimes::origin_time_us(const Snapshot& s) const {
  return windowed() ? file_first_time_us : step_time_us(s, 0);
}

int64_t DeviceLifetimes::step_time_us(const Snapshot& s, uint32_t step) const {
  if (event_count == 0) return 0;
  uint32_t e = step == 0 ? 0 : std::min(step - 1, event_count - 1);
  return s.events.time_us[event_begin + e];
}

bool DeviceLifetimes::timed(const Snapshot& s) const {
  return records_times(s.events, event_begin, event_begin + event_count);
}

uint32_t DeviceLifetimes::peak_step() const {
  if (known_peak_step < total.size()) return known_peak_step;
  if (total.empty()) return 0;
  // Of a loaded window, its steps only: the rows kept from before and after it are not steps of the file.
  const size_t last = windowed() ? std::min<size_t>(window_last(), total.size() - 1) : total.size() - 1;
  const size_t first = windowed() ? std::min<size_t>(window_first(), last) : 0;
  return static_cast<uint32_t>(std::max_element(total.begin() + first, total.begin() + last + 1) - total.begin());
}

const DeviceLifetimes* Lifetimes::device(int64_t ordinal) const {
  for (const auto& d : devices)
    if (d.device == ordinal) return &d;
  return nullptr;
}

const DeviceLifetimes* Lifetimes::first_traced() const {
  for (const auto& d : devices)
    if (d.event_count > 0) return &d;
  return nullptr;
}

namespace {
// One warning per re-allocated address was one line each: 1.6M lines from a 1.2 MB file (an audit). The first ones
// say where; the rest are counted.
constexpr uint32_t kWarningsKept = 20;
}  // namespace

DeviceLifetimes detail::build_device_lifetimes_in(const Snapshot& s, int64_t device, unsigned parts) {
  DeviceLifetimes out;
  out.device = device;
  const DeviceTrace* trace = s.device(device);
  const uint32_t begin = trace ? trace->begin : 0;
  const uint32_t n = trace ? trace->count() : 0;
  out.event_begin = begin;
  out.event_count = n;
  out.first_step = trace ? trace->first_step : 0;
  out.before = trace ? std::min(trace->before, n) : 0;
  out.after = trace ? std::min(trace->after, n - out.before) : 0;
  out.file_events = trace ? trace->events_in_file() : 0;
  out.file_first_time_us = trace ? trace->file_first_time_us : 0;
  const EventColumns& ev = s.events;

  // Every column is sized once, to its final length, and rows are written in place: building 56-byte rows first and
  // copying them into columns held both at once (~350 MB for a 10M-event trace in the browser, whose heap never
  // gives memory back), and growing or re-copying columns leaves holes the heap keeps. The stacking order puts the
  // freed-only and final-state rows (known only after the replay) before the traced ones, so a first replay counts
  // them: it touches only an address map.
  detail::AddrMap live(4096);  // first addr -> 0; then addr -> row of the live (not yet free_completed) alloc
  uint32_t allocs = 0, freed_only = 0, final_only = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t r = begin + i;
    const Action a = ev.action[r];
    if (a == Action::kAlloc) {
      live.put(ev.addr[r], 0);
      ++allocs;
    } else if (a == Action::kFreeCompleted) {
      freed_only += live.erase(ev.addr[r]) == detail::AddrMap::kAbsent;
    }
  }
  for (const Segment& seg : s.segments) {
    if (seg.device != device) continue;
    for (const Block& b : s.blocks_of(seg))
      final_only += b.state == BlockState::kActiveAllocated && live.get(b.address) == detail::AddrMap::kAbsent;
  }
  const uint32_t front = final_only + freed_only;  // rows [0, front) stack before the traced ones
  const size_t total_rows = size_t{front} + allocs;
  // All on this thread: a worker thread's allocations come from an arena of its own, fresh pages to fault in, where
  // this thread's heap has the parse's freed memory to reuse (two threads sizing them took 5.8 ms, one 1.5 ms).
  out.addr.resize(total_rows);
  out.size.resize(total_rows);
  out.block_size.resize(total_rows);
  out.stream.resize(total_rows);
  out.stack.resize(total_rows);
  out.alloc_event.resize(total_rows);
  out.free_event.assign(total_rows, kNoEvent);
  out.free_requested_event.assign(total_rows, kNoEvent);
  out.origin.resize(total_rows);
  auto put = [&out](uint32_t row, uint64_t addr, uint64_t size, uint64_t block_size, int64_t stream, StackId stack,
                    uint32_t alloc_event, uint32_t free_event, uint32_t free_requested_event, LifetimeOrigin origin) {
    out.addr[row] = addr;
    out.size[row] = size;
    out.block_size[row] = block_size;
    out.stream[row] = stream;
    out.stack[row] = stack;
    out.alloc_event[row] = alloc_event;
    out.free_event[row] = free_event;
    out.free_requested_event[row] = free_requested_event;
    out.origin[row] = origin;
  };

  // The traced rows on two cores, split by column, not by row: one core copies each alloc's own fields into its row
  // (a traced alloc's row is `front` plus the allocs before it), the other replays the frees into the two free
  // columns. Neither writes a column the other does, so no cache line goes back and forth between the cores (an
  // earlier split by address halves wrote interleaved rows of every column from both, and took longer than one core).
  struct FreedOnly {
    uint32_t event, src, requested;  // the free_completed, the event whose fields it takes, its free_requested
  };
  std::vector<FreedOnly> freed;  // in event order
  uint32_t allocated_again = 0;  // addresses allocated again without a free; the first kWarningsKept are warned of
  detail::both(
      parts >= 2,
      [&] {
        uint32_t row = front;
        for (uint32_t i = 0; i < n; ++i) {
          const uint32_t r = begin + i;
          if (ev.action[r] != Action::kAlloc) continue;
          out.addr[row] = ev.addr[r];
          out.size[row] = ev.size[r];
          out.stream[row] = ev.stream[r];
          out.stack[row] = ev.stack[r];
          out.alloc_event[row] = i;
          ++row;  // block_size 0 and origin kTraced are the columns' zeroes
        }
      },
      [&] {
        live = detail::AddrMap(4096);
        detail::AddrMap requested_before(64);  // addr -> free_requested event of a block whose alloc we never saw
        uint32_t next_traced = front;
        for (uint32_t i = 0; i < n; ++i) {
          const uint32_t r = begin + i;
          const Action a = ev.action[r];
          if (a != Action::kAlloc && a != Action::kFreeRequested && a != Action::kFreeCompleted) continue;
          const uint64_t addr = ev.addr[r];
          switch (a) {
            case Action::kAlloc: {
              if (live.get(addr) != detail::AddrMap::kAbsent && allocated_again++ < kWarningsKept)
                out.warnings.push_back("event " + std::to_string(i) +
                                       ": address allocated again without a free; the earlier allocation stays "
                                       "alive (as in PyTorch's viewer)");
              live.put(addr, next_traced++);
              break;
            }
            case Action::kFreeRequested: {
              const uint32_t t = live.get(addr);
              if (t != detail::AddrMap::kAbsent) {
                out.free_requested_event[t] = i;
              } else {
                requested_before.put(addr, i);
              }
              break;
            }
            default: {  // kFreeCompleted
              const uint32_t t = live.erase(addr);
              if (t != detail::AddrMap::kAbsent) {
                out.free_event[t] = i;
                break;
              }
              // PyTorch elides an immediately preceding free_requested of the same address into one `free` event
              // and keeps that event's fields; otherwise the free_completed's own.
              uint32_t src = r;
              if (i > 0 && ev.action[r - 1] == Action::kFreeRequested && ev.addr[r - 1] == addr) src = r - 1;
              freed.push_back({i, src, requested_before.erase(addr)});
              break;
            }
          }
        }
      });
  static_assert(LifetimeOrigin{} == LifetimeOrigin::kTraced);

  // Frees without an alloc. Stacking order: PyTorch pushes freed-only then final-state elements to
  // `initially_allocated`, reverses it, and stacks those first: the last freed-only row right after the final-state
  // ones.
  uint32_t freed_seen = 0;
  for (const FreedOnly& f : freed)
    put(front - 1 - freed_seen++, ev.addr[f.src], ev.size[f.src], 0, ev.stream[f.src], ev.stack[f.src], kNoEvent,
        f.event, f.requested == detail::AddrMap::kAbsent ? kNoEvent : f.requested, LifetimeOrigin::kFreedOnly);
  if (allocated_again > out.warnings.size())
    out.warnings.push_back("... and " + std::to_string(allocated_again - out.warnings.size()) +
                           " more allocations at an address already allocated (" + std::to_string(allocated_again) +
                           " in all)");

  // Final state: blocks still active. Traced allocs alive at the end learn their allocator block size here.
  uint32_t final_seen = 0;
  for (const Segment& seg : s.segments) {
    if (seg.device != device) continue;
    for (const Block& b : s.blocks_of(seg)) {
      if (b.state != BlockState::kActiveAllocated && b.state != BlockState::kActivePendingFree) continue;
      const uint32_t t = live.get(b.address);
      if (t != detail::AddrMap::kAbsent) {
        out.block_size[t] = b.size;
        continue;
      }
      // PyTorch adds only active_allocated blocks; a pending-free block with no traced alloc is not drawn.
      if (b.state != BlockState::kActiveAllocated) continue;
      put(final_only - 1 - final_seen++, b.address, b.requested_size, b.size, seg.stream, b.stack, kNoEvent, kNoEvent,
          kNoEvent, LifetimeOrigin::kFinalState);
    }
  }

  out.total = detail::step_totals(out, n);
  out.known_peak_step = out.peak_step();
  return out;
}

namespace {
// Two parts when a core is free for the second (a one-GPU rank's file: one device, the other core idle) and the
// trace is long enough to pay for a thread.
unsigned parts_for(const Snapshot& s, size_t devices, int64_t device) {
  const DeviceTrace* trace = s.device(device);
  return devices == 1 && trace && trace->count() >= detail::kEventsWorthAThread && detail::threads_for(2) >= 2 ? 2 : 1;
}
}  // namespace

DeviceLifetimes build_device_lifetimes(const Snapshot& s, int64_t device) {
  return detail::build_device_lifetimes_in(s, device, parts_for(s, 1, device));
}

std::vector<int64_t> lifetime_devices(const Snapshot& s) {
  // PyTorch offers a device when its trace has events or it has segments.
  std::vector<int64_t> ordinals;
  for (const DeviceTrace& d : s.devices)
    if (d.count() > 0) ordinals.push_back(d.device);
  for (const Segment& seg : s.segments) ordinals.push_back(seg.device);
  // A merged file's outside part can hold memory on a device PyTorch recorded nothing on (a stray context on GPU 0,
  // or PyTorch's caching off): that device is answered too, with no PyTorch events.
  if (s.outside) {
    for (const DeviceTrace& d : s.outside->devices)
      if (d.count() > 0) ordinals.push_back(d.device);
    for (const Segment& seg : s.outside->segments) ordinals.push_back(seg.device);
  }
  std::sort(ordinals.begin(), ordinals.end());
  ordinals.erase(std::unique(ordinals.begin(), ordinals.end()), ordinals.end());
  return ordinals;
}

Lifetimes build_lifetimes(const Snapshot& s) {
  const SingleThreaded small(s.events.size_rows() < detail::kEventsWorthAThread);  // a thread would cost more
  const std::vector<int64_t> ordinals = lifetime_devices(s);
  Lifetimes out;
  out.devices.resize(ordinals.size());
  detail::parallel_for(ordinals.size(), [&](size_t k) {
    out.devices[k] = detail::build_device_lifetimes_in(s, ordinals[k], parts_for(s, ordinals.size(), ordinals[k]));
  });
  return out;
}

bool memoryviz_offers(const Snapshot& s, int64_t device) {
  const DeviceTrace* trace = s.device(device);
  if (!trace) return false;
  if (trace->count() > 0) return true;
  for (const Segment& seg : s.segments)
    if (seg.device == device) return true;
  return false;
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
      m.distinct_totals_count = 1;
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
      ++m.distinct_totals_count;
      if (with_totals) m.distinct_totals.push_back(recorded);
      last = recorded;
      have_last = true;
    }
  }
  m.final_active_bytes = last;
  return m;
}

}  // namespace allocscope
