// Allocation lifetimes per device, replayed exactly like PyTorch's Active Memory Timeline (MemoryViz.js
// `process_alloc_data`), as columns: one row per allocation, one total per step.
//
// The x axis is the *step*: step s is the state after the first s events of the device's trace (step 0: before the
// first event; step n: after the last). Allocation i is alive in steps [birth_step(i), death_step(i)).
//
// Semantics mirrored from PyTorch (docs/timeline.md has the details):
// - `alloc` pairs with the next `free_completed` at the same address (`free_requested` alone changes nothing).
// - A `free_completed` with no alloc in the trace (the ring buffer wrapped) is an allocation alive from step 0 until
//   that free; its size, stream and frames are those of the free event (of `free_requested` when it immediately
//   precedes, like PyTorch's elision of the pair into one `free`).
// - A block `active_allocated` in the final `segments` whose address has no live traced alloc is alive from step 0
//   to the end (size = its requested_size, frames = the block's).
// - Rows are in PyTorch's stacking order (bottom first): final-state blocks in reverse file order, then freed-only
//   allocations in reverse trace order, then traced allocs in event order. Each new allocation goes on top, so an
//   allocation's rank in the stack is its row index.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "allocscope/snapshot.h"

namespace allocscope {

constexpr uint32_t kNoEvent = std::numeric_limits<uint32_t>::max();

enum class LifetimeOrigin : uint8_t {
  kTraced,      // its alloc event is in the trace
  kFreedOnly,   // only its free is in the trace: allocated before the window
  kFinalState,  // active in the final segments, allocated before the window, never freed in it
};

struct DeviceLifetimes {
  int64_t device = 0;        // ordinal: index in `device_traces`
  uint32_t event_begin = 0;  // the device's first row in Snapshot::events
  uint32_t event_count = 0;  // n: steps run 0..n
  // A window of the file (LoadOptions::window): the first `before` events are the allocations alive at its start
  // and the last `after` the ones kept from past it (DeviceTrace), not steps of the file. Steps
  // window_first()..window_last() are the window's, the file's step_offset() more; answers search only those. A
  // whole load: all 0, and file_events == event_count.
  uint64_t first_step = 0;
  uint32_t before = 0;
  uint32_t after = 0;
  uint64_t file_events = 0;
  int64_t file_first_time_us = 0;
  uint32_t window_first() const { return before; }
  uint32_t window_last() const { return event_count - after; }
  int64_t step_offset() const { return static_cast<int64_t>(first_step) - before; }
  bool windowed() const {
    return first_step != 0 || before != 0 || after != 0 || (file_events && file_events != event_count);
  }

  // Per allocation (row), in stacking order.
  std::vector<uint64_t> addr;
  std::vector<uint64_t> size;        // bytes PyTorch draws: the event's size (the request) or the block's requested_size
  std::vector<uint64_t> block_size;  // the allocator's block size when the final segments know it, else 0
  std::vector<int64_t> stream;
  std::vector<StackId> stack;
  std::vector<uint32_t> alloc_event;           // device-local event index; kNoEvent: before the trace
  std::vector<uint32_t> free_event;            // its `free_completed`; kNoEvent: still alive at the end
  std::vector<uint32_t> free_requested_event;  // kNoEvent when none was seen
  std::vector<LifetimeOrigin> origin;

  // Per step (n + 1 entries): total active bytes (sum of `size` of the allocations alive at that step).
  std::vector<uint64_t> total;

  // Findings that do not stop the replay (e.g. an address allocated twice without a free: PyTorch forgets the first).
  std::vector<std::string> warnings;

  uint32_t count() const { return static_cast<uint32_t>(addr.size()); }
  uint32_t steps() const { return event_count + 1; }
  uint32_t birth_step(uint32_t i) const { return alloc_event[i] == kNoEvent ? 0 : alloc_event[i] + 1; }
  uint32_t death_step(uint32_t i) const { return free_event[i] == kNoEvent ? event_count + 1 : free_event[i] + 1; }
  bool alive_at(uint32_t i, uint32_t step) const { return birth_step(i) <= step && step < death_step(i); }
  // Real time of a step: the time_us of the event that produced it (step 0: the first event's time).
  int64_t step_time_us(const Snapshot& s, uint32_t step) const;
  // The time answers count from ("+1.2 s"): the trace's first entry, also when only a window of it was loaded.
  int64_t origin_time_us(const Snapshot& s) const;
  // Whether the trace records times: PyTorch 2.0's and 2.1's files write time_us 0 on every event, and a time read
  // from them would look measured.
  bool timed(const Snapshot& s) const;
  // Real times of an allocation: its alloc event (the first event's time when allocated before the trace) and its
  // free_completed (the last event's time when still alive).
  int64_t alloc_time_us(const Snapshot& s, uint32_t i) const { return step_time_us(s, birth_step(i)); }
  int64_t free_time_us(const Snapshot& s, uint32_t i) const { return step_time_us(s, death_step(i)); }
  uint32_t peak_step() const;  // first step with the highest total

  // build_device_lifetimes finds the peak once, with `total`: a scan of 10M totals per query was 17 ms in the browser,
  // on every redraw. Lifetimes filled by hand (tests) leave it unset and peak_step() scans.
  uint32_t known_peak_step = kNoEvent;
};

// One entry per device that PyTorch's viewer offers (a trace with events, or segments on that device), in ordinal order.
struct Lifetimes {
  std::vector<DeviceLifetimes> devices;
  const DeviceLifetimes* device(int64_t ordinal) const;
  const DeviceLifetimes* first_traced() const;  // the first device whose trace has events, or null
};

DeviceLifetimes build_device_lifetimes(const Snapshot& snapshot, int64_t device);
Lifetimes build_lifetimes(const Snapshot& snapshot);
// The devices build_lifetimes answers, in its order (Lifetimes::devices[k].device).
std::vector<int64_t> lifetime_devices(const Snapshot& snapshot);

// What PyTorch's viewer computes for one device (the numbers in tests/fixtures/expected/NAME.memoryviz.json).
struct MemoryVizSummary {
  uint64_t allocations = 0;        // elements laid out, including blocks alive before the trace
  uint64_t peak_active_bytes = 0;  // its `max_size`: the highest total after an action
  uint64_t final_active_bytes = 0;  // the last value of its `max_at_time` (a final free shows its pre-free total)
  std::vector<uint64_t> distinct_totals;  // `max_at_time` with consecutive repeats removed
  uint64_t distinct_totals_count = 0;     // its length, counted also when it is not built
};
// `with_totals` = false skips building distinct_totals (the 1M-event file has half a million; 10M events, 80 MB).
MemoryVizSummary memoryviz_summary(const DeviceLifetimes& lt, bool with_totals = true);
// Whether PyTorch's viewer offers `device`: an entry of device_traces whose trace has events or whose device has
// segments (MemoryViz.js, snapshot_change). A device with segments and an empty trace is drawn flat at its initial
// total; one past the end of device_traces (a bare list of segments) is not offered.
bool memoryviz_offers(const Snapshot& s, int64_t device);

}  // namespace allocscope
