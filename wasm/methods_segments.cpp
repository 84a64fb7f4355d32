// Active Cached Segment Timeline (reserved memory as bands, expandable segments included) and Allocator State
// History (segments with their blocks at one step), over the core's SegmentTimeline and AllocatorStateIndex.
#include <algorithm>
#include <cstdio>
#include <map>

#include "allocscope/allocator_state.h"
#include "allocscope/outside.h"
#include "allocscope/segment_timeline.h"
#include "timeline_cache.h"

namespace allocscope::wasm {
namespace {

struct DeviceSegments {
  SegmentTimeline bands;
  StackedTimeline layout;
  DrawResult scratch;
  std::unique_ptr<AllocatorStateIndex> state;  // built on first Allocator State query
  AllocatorState scratch_state;
  std::unique_ptr<OutsideIndex> outside;  // a merged snapshot's memory outside PyTorch (outside.h), built on first draw
};

DeviceSegments* segments_of(Loaded& f, int64_t device) {
  static const size_t slot = new_cache_slot();
  auto* m = cached<std::map<int64_t, std::unique_ptr<DeviceSegments>>>(f, slot);
  if (!m) m = store(f, slot, std::make_unique<std::map<int64_t, std::unique_ptr<DeviceSegments>>>());
  auto it = m->find(device);
  if (it != m->end()) return it->second.get();
  if (!timeline_of(f, device)) return nullptr;
  auto d = std::make_unique<DeviceSegments>();
  d->bands = build_segment_timeline(f.snapshot, device);
  d->layout = layout_segments(d->bands);
  return (*m)[device] = std::move(d), (*m)[device].get();
}

}  // namespace

const SegmentTimeline* segment_bands_of(Loaded& f, int64_t device) {
  DeviceSegments* d = segments_of(f, device);
  return d ? &d->bands : nullptr;
}

namespace {

std::string hex(uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

DrawRequest request_of(const Request& r, const DeviceTimeline& t, uint32_t steps) {
  DrawRequest q;
  q.axis = r.str("axis") == "time" ? DrawRequest::Axis::kTime : DrawRequest::Axis::kStep;
  q.time = &t.time;
  q.x_begin = r.f64("x0", 0);
  q.x_end = std::max(q.x_begin + 1e-9, r.f64("x1", steps));
  q.width_px = static_cast<uint32_t>(std::clamp<int64_t>(r.i64("width", 1000), 1, 16384));
  q.height_px = static_cast<uint32_t>(std::clamp<int64_t>(r.i64("height", 400), 1, 16384));
  q.y_min_bytes = r.f64("y_min", 0);
  q.bytes_per_px = r.f64("bytes_per_px", 0);
  return q;
}

Answer draw(const Request& r, std::span<Loaded* const> files) {
  DeviceTimeline* t = timeline_of(*files[0], r.i64("device"));
  DeviceSegments* d = t ? segments_of(*files[0], r.i64("device")) : nullptr;
  if (!d) return Answer::error("no trace for that device");
  DrawRequest q = request_of(r, *t, d->layout.steps());
  const uint32_t steps = d->layout.steps();
  uint32_t a0 = 0, b0 = 0, s0 = 0, a1 = 0, b1 = 0, s1 = 0, wmax_step = 0;
  if (steps) {
    d->layout.column_range(q, 0, &a0, &b0, &s0);
    d->layout.column_range(q, q.width_px - 1, &a1, &b1, &s1);
    wmax_step = d->layout.argmax_total(a0, std::max(a0, b1));
  }
  const uint64_t wmax = steps ? d->layout.total(wmax_step) : 0;
  const bool fit = !(q.bytes_per_px > 0);
  if (fit) q.bytes_per_px = std::max(1.0, static_cast<double>(wmax) * 1.06 / q.height_px);
  d->layout.draw(q, &d->scratch);
  // A merged snapshot: the memory outside PyTorch's allocator at each column's state, stacked on PyTorch's reserved
  // bytes by the page (device memory in all). "Fit" then scales to the tallest of the two together.
  std::vector<double> outside;
  const Snapshot& s = files[0]->snapshot;
  if (s.outside) {
    if (!d->outside) d->outside = std::make_unique<OutsideIndex>(s, r.i64("device"));
    double top = 0;
    outside.resize(d->scratch.column_step.size());
    for (size_t c = 0; c < outside.size(); ++c) {
      outside[c] = static_cast<double>(d->outside->bytes_at(t->lifetimes->step_time_us(s, d->scratch.column_step[c])));
      top = std::max(top, d->scratch.column_total[c] + outside[c]);
    }
    if (fit && top * 1.06 / q.height_px > q.bytes_per_px) {
      q.bytes_per_px = top * 1.06 / q.height_px;
      d->layout.draw(q, &d->scratch);
    }
  }
  const DrawResult& res = d->scratch;
  const uint32_t peak = steps ? d->layout.argmax_total(0, steps - 1) : 0;
  Answer a;
  a.body = {{"steps", steps},
            {"rows", d->layout.rows()},
            {"rects", res.rects()},
            {"bytes_per_px", q.bytes_per_px},
            {"y_min", q.y_min_bytes},
            {"window_max", wmax},
            {"peak_step", peak},
            {"peak_bytes", steps ? d->layout.total(peak) : 0},
            {"warnings", d->bands.warnings}};
  a.add<uint32_t>("column_step", "u32", res.column_step);
  a.add<double>("column_total", "f64", res.column_total);
  // Narrower than the model on the wire (17 bytes a rectangle, not 24): columns fit 16 bits (width <= 16384) and
  // the page asks a run's count only whether it is above 1. `allocscope view` sends a wide draw of 10M events,
  // ~130k rectangles, over HTTP, and those bytes were most of a pan/zoom step's wait.
  a.add_saturated<uint16_t>("x0", "u16", res.rect_x0);
  a.add_saturated<uint16_t>("x1", "u16", res.rect_x1);
  a.add<float>("y0", "f32", res.rect_y0);
  a.add<float>("y1", "f32", res.rect_y1);
  a.add<uint32_t>("row", "u32", res.rect_row);
  a.add_saturated<uint8_t>("count", "u8", res.rect_count);  // at most 255
  if (d->outside) {
    a.body["outside_peak"] = d->outside->peak();
    a.add<double>("column_outside", "f64", outside);
  }
  return a;
}

json band_json(const Loaded& f, const DeviceTimeline& t, const SegmentTimeline& b, uint32_t i) {
  const Snapshot& s = f.snapshot;
  json j{{"row", i},
         {"kind", "segment"},
         {"address", hex(b.addr[i])},
         {"size", b.size[i]},
         {"stream", b.stream[i]},
         {"expandable", b.expandable[i] != 0},
         {"birth_step", b.birth_step(i)},
         {"death_step", b.death_step(i)},
         {"birth_us", t.lifetimes->step_time_us(s, b.birth_step(i))},
         {"origin", b.map_event[i] == kNoEvent ? "mapped before the trace" : "traced"},
         {"frames", frames_json(s, b.stack[i])}};
  if (b.unmap_event[i] != kNoEvent) j["death_us"] = t.lifetimes->step_time_us(s, b.death_step(i));
  return j;
}

Answer hit(const Request& r, std::span<Loaded* const> files) {
  DeviceTimeline* t = timeline_of(*files[0], r.i64("device"));
  DeviceSegments* d = t ? segments_of(*files[0], r.i64("device")) : nullptr;
  if (!d || !d->layout.steps()) return Answer::error("no trace for that device");
  DrawRequest q = request_of(r, *t, d->layout.steps());
  const uint32_t column = static_cast<uint32_t>(std::clamp<int64_t>(r.i64("column"), 0, q.width_px - 1));
  uint32_t first, last, shown;
  d->layout.column_range(q, column, &first, &last, &shown);
  Answer a;
  a.body = {{"step", shown}, {"total", d->layout.total(shown)},
            {"time_us", t->lifetimes->step_time_us(files[0]->snapshot, shown)}};
  const uint32_t row = d->layout.hit_test_px(q, column, r.f64("y_px"));
  if (row != kNoRow) a.body["allocation"] = band_json(*files[0], *t, d->bands, row);
  return a;
}

// The allocator's state after `step` events: segments (address order) and their blocks as typed arrays; offsets are
// relative to the segment so they stay exact as doubles even when addresses exceed 2^53.
Answer state_at(const Request& r, std::span<Loaded* const> files) {
  Loaded& f = *files[0];
  DeviceTimeline* t = timeline_of(f, r.i64("device"));
  DeviceSegments* d = t ? segments_of(f, r.i64("device")) : nullptr;
  if (!d) return Answer::error("no trace for that device");
  if (!d->state) d->state = std::make_unique<AllocatorStateIndex>(f.snapshot, *t->lifetimes, d->bands);
  const uint32_t steps = d->state->steps();
  if (!steps) return Answer::error("no states for that device");
  const uint32_t step = static_cast<uint32_t>(std::clamp<int64_t>(r.i64("step", steps - 1), 0, steps - 1));
  AllocatorState& st = d->scratch_state;
  d->state->at(step, &st);
  const size_t ns = st.segment_addr.size(), nb = st.block_addr.size();
  std::vector<double> seg_size(ns), seg_alloc(ns), blk_off(nb), blk_size(nb), blk_req(nb);
  std::vector<uint32_t> blk_seg(nb, UINT32_MAX), blk_row(st.block_row);
  json seg_addr = json::array();
  for (size_t k = 0; k < ns; ++k) {
    seg_addr.push_back(hex(st.segment_addr[k]));
    seg_size[k] = static_cast<double>(st.segment_size[k]);
    seg_alloc[k] = static_cast<double>(st.segment_allocated[k]);
    for (uint32_t b = st.segment_first_block[k]; b < st.segment_first_block[k] + st.segment_num_blocks[k]; ++b) {
      blk_seg[b] = static_cast<uint32_t>(k);
      blk_off[b] = static_cast<double>(st.block_addr[b] - st.segment_addr[k]);
    }
  }
  for (size_t b = 0; b < nb; ++b) {
    blk_size[b] = static_cast<double>(st.block_size[b]);
    blk_req[b] = static_cast<double>(st.block_requested[b]);
  }
  std::vector<uint8_t> flags(nb);  // bit 0 pending free, bit 1 size known
  for (size_t b = 0; b < nb; ++b) flags[b] = (st.block_pending_free[b] ? 1 : 0) | (st.block_size_known[b] ? 2 : 0);
  std::vector<uint8_t> seg_exp(st.segment_expandable);
  // Private pools (a CUDA graph's, a MemPool's: segment_pool_id other than (0, 0)): their free memory serves only
  // their own allocations. The state's segments are matched by address to the snapshot's, whose pool is known; one
  // the snapshot no longer lists (freed before it was taken) reads as the default pool.
  std::vector<const Segment*> known;
  for (const Segment& sg : f.snapshot.segments)
    if (sg.device == r.i64("device")) known.push_back(&sg);
  std::sort(known.begin(), known.end(), [](const Segment* a, const Segment* b) { return a->address < b->address; });
  std::vector<uint8_t> seg_pool(ns, 0);
  std::map<std::pair<int64_t, int64_t>, uint64_t> pools;  // private pool -> bytes reserved at this step
  for (size_t k = 0; k < ns; ++k) {
    auto it = std::upper_bound(known.begin(), known.end(), st.segment_addr[k],
                               [](uint64_t addr, const Segment* sg) { return addr < sg->address; });
    if (it == known.begin()) continue;
    const Segment* sg = *(it - 1);
    if (st.segment_addr[k] >= sg->address + sg->total_size || (sg->pool_id[0] == 0 && sg->pool_id[1] == 0)) continue;
    seg_pool[k] = 1;
    pools[{sg->pool_id[0], sg->pool_id[1]}] += st.segment_size[k];
  }
  json private_pools = json::array();
  for (const auto& [id, bytes] : pools) private_pools.push_back({{"pool", {id.first, id.second}}, {"reserved_bytes", bytes}});
  Answer a;
  a.body = {{"step", step},
            {"steps", steps},
            {"time_us", t->lifetimes->step_time_us(f.snapshot, step)},
            {"segment_address", seg_addr},
            {"reserved_bytes", st.reserved_bytes},
            {"allocated_bytes", st.allocated_bytes},
            {"requested_bytes", st.requested_bytes},
            {"pending_free_bytes", st.pending_free_bytes},
            {"rounding_waste_bytes", st.rounding_waste_bytes},
            {"inactive_bytes", st.inactive_bytes},
            {"blocks_outside_segments", st.blocks_outside_segments},
            {"private_pools", private_pools}};
  if (step > 0) {
    const uint32_t e = t->lifetimes->event_begin + step - 1;
    a.body["event"] = {{"action", action_name(f.snapshot.events.action[e])},
                       {"size", f.snapshot.events.size[e]},
                       {"address", hex(f.snapshot.events.addr[e])}};
  }
  a.add<double>("seg_size", "f64", seg_size);
  a.add<double>("seg_allocated", "f64", seg_alloc);
  a.add<uint8_t>("seg_expandable", "u8", seg_exp);
  a.add<uint8_t>("seg_private_pool", "u8", seg_pool);
  a.add<uint32_t>("blk_seg", "u32", blk_seg);
  a.add<double>("blk_offset", "f64", blk_off);
  a.add<double>("blk_size", "f64", blk_size);
  a.add<double>("blk_requested", "f64", blk_req);
  a.add<uint32_t>("blk_row", "u32", blk_row);
  a.add<uint8_t>("blk_flags", "u8", flags);
  return a;
}

const RegisterMethod r1({"segment_draw", draw});
const RegisterMethod r2({"segment_hit", hit});
const RegisterMethod r3({"state_at", state_at});

}  // namespace
}  // namespace allocscope::wasm
