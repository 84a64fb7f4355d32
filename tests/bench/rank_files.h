// Rank files for the `ranks` benchmark and tests: copies of one real snapshot, each with a small difference of its
// own (as ranks of one job differ: shard sizes, buffers), and planted outliers of three kinds whose answer is known:
//   kHolds     holds 30% of the base's peak more, at a site no other rank has (planted.py:21:cache_activations);
//   kCaches    reserves 40% more that it does not hold (a segment whose block was freed: cached memory);
//   kShardMore holds 12% more at a site every rank has (rank_buffers.py:12:shard_buffer).
// Written with the project's writer, so the files are PyTorch pickles that PyTorch's tools read too.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "allocscope/snapshot.h"
#include "allocscope/summary.h"
#include "allocscope/lifetimes.h"
#include "allocscope/frame_filter.h"
#include "allocscope/writer.h"

namespace allocscope::rankfiles {

enum class Plant { kNone, kHolds, kCaches, kShardMore };

constexpr uint64_t kAlign = 2ull << 20;

inline uint64_t round_up(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// The per-rank buffer every rank has: 0 to 2% of the base's peak, varying with the rank.
inline uint64_t shard_bytes(uint64_t base_peak, int rank) {
  return round_up(static_cast<uint64_t>(static_cast<double>(base_peak) * 0.0005 * ((rank * 7919) % 41)));
}

struct Row {
  Action action;
  uint64_t addr, size;
  StackId stack;
};

// Inserts `rows` before the first event of `device` (all at one time, just before it), and a segment with one
// block per buffer into the final state.
inline void prepend(Snapshot* s, int64_t device, const std::vector<Row>& rows) {
  const DeviceTrace* dt = s->device(device);
  if (!dt) return;
  const uint32_t at = dt->begin;
  EventColumns& e = s->events;
  const int64_t t = dt->count() ? e.time_us[at] - 1 : 0;
  const int64_t stream = dt->count() ? e.stream[at] : 0;
  const bool layouts = !e.layout.empty();
  uint8_t layout = 0;
  if (layouts)
    for (uint32_t i = dt->begin; i < dt->end; ++i)
      if (e.action[i] == Action::kAlloc) {
        layout = e.layout[i];
        break;
      }
  auto ins = [&](auto& col, auto value) { col.insert(col.begin() + at, rows.size(), value); };
  ins(e.action, Action::kAlloc);
  ins(e.addr, uint64_t{0});
  ins(e.size, uint64_t{0});
  ins(e.stream, stream);
  ins(e.time_us, t);
  ins(e.stack, StackId{0});
  e.compile_context.insert(at, rows.size(), StringId{0});
  e.user_metadata.insert(at, rows.size(), StringId{0});
  if (layouts) ins(e.layout, layout);
  for (size_t k = 0; k < rows.size(); ++k) {
    e.action[at + k] = rows[k].action;
    e.addr[at + k] = rows[k].addr;
    e.size[at + k] = rows[k].size;
    e.stack[at + k] = rows[k].stack;
  }
  for (DeviceTrace& d : s->devices) {
    if (d.device == device) {
      d.end += static_cast<uint32_t>(rows.size());
    } else if (d.begin >= at && d.device != device) {
      d.begin += static_cast<uint32_t>(rows.size());
      d.end += static_cast<uint32_t>(rows.size());
    }
  }
}

inline StackId site(Snapshot* s, const char* file, int line, const char* fn) {
  Frame f;
  f.filename = s->strings.intern(file);
  f.name = s->strings.intern(fn);
  f.line = line;
  s->frames.push_back(f);
  const FrameId id = static_cast<FrameId>(s->frames.size() - 1);
  return s->stacks.intern({&id, 1});
}

// Adds a segment of `size` at `addr` with one block, held (active) or cached (inactive), to the final state.
inline void add_segment(Snapshot* s, int64_t device, uint64_t addr, uint64_t size, bool held, StackId stack) {
  Segment seg;
  seg.device = device;
  seg.address = addr;
  seg.total_size = size;
  seg.allocated_size = held ? size : 0;
  seg.active_size = held ? size : 0;
  seg.requested_size = held ? size : 0;
  seg.segment_type = s->strings.intern("large");
  seg.stack = stack;
  seg.first_block = static_cast<uint32_t>(s->blocks.size());
  seg.num_blocks = 1;
  Block b;
  b.address = addr;
  b.size = size;
  b.requested_size = size;
  b.state = held ? BlockState::kActiveAllocated : BlockState::kInactive;
  b.stack = held ? stack : 0;
  s->blocks.push_back(b);
  s->segments.push_back(seg);
}

// Rank `rank`'s copy of `base` (whose busiest device is `device` with peak allocated `base_peak`).
inline Snapshot make_rank(const Snapshot& base, int64_t device, uint64_t base_peak, int rank, Plant plant) {
  Snapshot s = base;
  uint64_t next = 0;
  for (const Segment& seg : s.segments) next = std::max(next, seg.address + seg.total_size);
  for (uint64_t a : s.events.addr) next = std::max(next, a);
  next = round_up(next) + kAlign;
  std::vector<Row> rows;
  auto buffer = [&](uint64_t size, StackId stack, bool held) {
    if (!size) return;
    rows.push_back({Action::kSegmentAlloc, next, size, stack});
    rows.push_back({Action::kAlloc, next, size, stack});
    if (!held) {
      rows.push_back({Action::kFreeRequested, next, size, stack});
      rows.push_back({Action::kFreeCompleted, next, size, stack});
    }
    add_segment(&s, device, next, size, held, stack);
    next += round_up(size) + kAlign;
  };
  uint64_t shard = shard_bytes(base_peak, rank);
  if (plant == Plant::kShardMore) shard += round_up(base_peak * 12 / 100);
  buffer(shard, site(&s, "rank_buffers.py", 12, "shard_buffer"), true);
  if (plant == Plant::kHolds) buffer(round_up(base_peak * 30 / 100), site(&s, "planted.py", 21, "cache_activations"), true);
  if (plant == Plant::kCaches) buffer(round_up(base_peak * 40 / 100), site(&s, "planted.py", 33, "warmup_buffer"), false);
  prepend(&s, device, rows);
  return s;
}

// The base's busiest device and its peak allocated bytes, as `ranks` will see them.
inline void measure_base(const Snapshot& base, int64_t* device, uint64_t* peak) {
  const Lifetimes lt = build_lifetimes(base);
  const FrameFilter ff(base);
  const Summary sum = summarize(base, lt, ff, 1);
  const DeviceSummary* best = nullptr;
  for (const DeviceSummary& d : sum.devices)
    if (!best || d.events > best->events) best = &d;
  *device = best ? best->device : 0;
  *peak = best ? best->peak_allocated : 0;
}

// Which ranks get which plant among `n`: three outliers spread over the job.
inline Plant plant_of(int rank, int n) {
  if (n < 6) return Plant::kNone;
  if (rank == n / 5) return Plant::kHolds;
  if (rank == n / 2) return Plant::kCaches;
  if (rank == n - 2) return Plant::kShardMore;
  return Plant::kNone;
}

}  // namespace allocscope::rankfiles
