// The verdict's parts: the error band, the decision from a range of needs, what a trace that ran out of memory
// or starts mid-run says, and the notes every prediction carries.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "allocscope/frame_filter.h"
#include "allocscope/iterations.h"
#include "allocscope/oom.h"
#include "whatif/internal.h"

namespace allocscope {
namespace whatif_detail {

// Said when the prediction reaches more than twice (or under half) the size a snapshot was recorded at: PyTorch picks
// some kernels by shape, and those can allocate what no recorded run did.
void note_extrapolation(double factor, std::vector<std::string>* notes) {
  if (!(factor > 2.0 || factor < 0.5)) return;
  char note[400];
  std::snprintf(note, sizeof note,
                "the target is %.3gx the nearest recorded size: kernels PyTorch picks by shape (a reduction split "
                "over blocks, a cuDNN algorithm, embedding's backward past 3072 indices) can allocate buffers no "
                "recorded run has (a bf16 MLP recorded at batch 256 and 512 read 7%% low at 2048); a snapshot nearer "
                "the target checks it",
                factor);
  notes->push_back(note);
}

// How far the least memory a prediction finds may be from what the run needs, by how far the target is from the
// nearest recorded size (a factor f, either way): 5% + 4% per doubling. Measured against what 36 real runs trained
// in (whatif_caps.json; WhatIf.VerdictsAreNeverWrong): the replay at a run's own sizes within 2.5%, one snapshot 2x
// away within 7.9% (the compiled GPT-2 from batch 8 to 4), 4x within 7.1%, 8x within 10% (the CNN from 16 to 128,
// whose cuDNN algorithms change with the shape).
// Capped at half: no measured error came near it, and a run predicted at a thousand times its batch is still
// told apart from a GPU a thousand times too small.
double error_band(double f) {
  if (!(f > 0) || !std::isfinite(f)) return 0.5;
  return std::min(0.5, 0.05 + 0.04 * std::fabs(std::log2(f)));
}

uint64_t times(uint64_t bytes, double x) { return capped(static_cast<double>(bytes) * x); }

// The memory PyTorch's allocator could use when the recorded run ran out (its reserved bytes then, plus the
// driver's free bytes the OOM event reports), the most over its OOMs whose cause is this device's size (a request too
// large, fragmentation, live tensors: the OOM analysis's one rule, oom.h); 0 without one. A run at least as large as
// recorded, on a GPU whose allocator has no more room than that, runs out the same way (same program, same sizes).
// An OOM under a per-process cap or beside memory held outside PyTorch says nothing about the GPU's size.
uint64_t room_at_oom(const Snapshot& s, const DeviceLifetimes& lt, const std::optional<GpuCapacity>& gpu) {
  bool any = false;
  for (uint32_t i = 0; i < lt.event_count; ++i) any |= s.events.action[lt.event_begin + i] == Action::kOom;
  if (!any) return 0;
  Lifetimes one;
  one.devices.push_back(lt);
  OomOptions o;
  o.gpu = gpu;
  uint64_t most = 0;
  for (const OomReport& r : analyze_ooms(s, one, o))
    if (r.device == lt.device && (r.cause == OomCause::kRequestTooLarge || r.cause == OomCause::kFragmentation ||
                                  r.cause == OomCause::kLiveTensors))
      most = std::max(most, r.reserved + r.device_free);
  return most;
}

// With expandable segments the run maps pages as its blocks need them, and needs about its allocated peak: less than
// this model of the default allocator finds where that allocator would fragment. So the low end reaches down to the
// allocated peak, and the model cannot call such a run "does not fit" for fragmentation it will not have.
// `floor`: what the run is measured to need (failed_floor), below which no end of the range goes. `oom_room`: the
// room the recorded run ran out in (room_at_oom; 0: none), measured, not modelled: a run at least as large as
// recorded, on a GPU with no more room, runs out too (an audit found the recorded configuration on the GPU it failed
// on called UNSURE).
Decision decide(const DeviceLifetimes& lt, const ReplayOrder& order, const std::vector<uint64_t>& low,
                const std::vector<uint64_t>& point,
                const std::vector<uint64_t>& high, uint64_t point_needed, double band, uint64_t room,
                const std::vector<uint8_t>* optional, bool expandable, uint64_t floor, uint64_t oom_room,
                const AllocatorSettings& settings, double high_band_extra) {
  Decision d;
  if (oom_room && room <= oom_room) floor = std::max(floor, room + 1);
  const uint64_t at_low = &low == &point ? point_needed : least_allocator_room(lt, order, low, optional, settings);
  const uint64_t at_high = &high == &point ? point_needed : least_allocator_room(lt, order, high, optional, settings);
  // (At the arithmetic's cap, 2^56 bytes, the range still holds the point.)
  d.low = std::min(times(std::min(at_low, point_needed), 1.0 - band), point_needed);
  // `high_band_extra`: what only the high end allows for (the part of a step a trace cut short never recorded).
  d.high = std::max(times(std::max(at_high, point_needed), 1.0 + band + high_band_extra), point_needed);
  if (expandable)
    d.low = std::min(d.low, times(replay_caching_allocator(lt, order, low, 0, nullptr, settings).peak_allocated,
                                  1.0 - band));
  d.low = std::max(d.low, floor);
  d.high = std::max(d.high, d.low);
  const bool point_fits =
      point_needed <= room && !replay_caching_allocator(lt, order, point, room, optional, settings).out_of_memory;
  if (point_fits && d.high <= room) d.verdict = Verdict::kFits;
  else if (d.low > room) d.verdict = Verdict::kDoesNotFit;
  return d;
}

// The requests that failed (a trace that ran out of memory) have no row, so a replay never tries them, and reads
// such a run as fitting the GPU it failed on, fragmentation included. `lt` with a row for each failed request, at
// its recorded size, from right after its failure to the next event; nullopt when the trace has none. Only for runs
// at least as large as recorded: a smaller one may ask for less.
std::optional<DeviceLifetimes> with_failed_requests(const Snapshot& s, const DeviceLifetimes& lt) {
  const auto first = s.events.action.begin() + lt.event_begin;
  if (std::none_of(first, first + lt.event_count, [](Action a) { return a == Action::kOom; })) return std::nullopt;
  DeviceLifetimes out = lt;
  for (uint32_t e = 0; e < lt.event_count; ++e) {
    const uint32_t row = lt.event_begin + e;
    if (s.events.action[row] != Action::kOom) continue;
    out.addr.push_back(0);
    out.size.push_back(s.events.size[row]);
    out.block_size.push_back(0);
    out.stream.push_back(s.events.stream[row]);
    out.stack.push_back(0);
    out.alloc_event.push_back(e);
    out.free_event.push_back(e + 1 < lt.event_count ? e + 1 : kNoEvent);
    out.free_requested_event.push_back(kNoEvent);
    out.origin.push_back(LifetimeOrigin{});
  }
  return out;
}

// What was alive when each failed request was made, plus the request (requested bytes; `with_failed` is
// with_failed_requests(lt)): measured, not modelled, so a floor for the least memory. 0 without failed requests.
uint64_t failed_floor(const DeviceLifetimes& lt, const std::optional<DeviceLifetimes>& with_failed) {
  uint64_t floor = 0;
  if (with_failed)
    for (uint32_t j = lt.count(); j < with_failed->count(); ++j)
      floor = std::max(floor, lt.total[std::min(with_failed->alloc_event[j], lt.steps() - 1)] + with_failed->size[j]);
  return floor;
}


// A trace that cannot say what the run holds at its peak, or what grows with the batch: no verdict from it says
// "fits". Returns the note that says why, or "".
// - It starts mid-run (a wrapped ring buffer kept only the newest events, or recording began late): it frees memory
//   it never saw allocated, 5% of its peak or more. What the run held before its first event, and how high it went
//   there, are unknown: a prediction from the part recorded can be far below the run (an audit: 1.2 GiB "fits" for
//   a run that needs 2.78 GiB, from its newest 10%).
// - It holds no allocation at all (a snapshot taken at an OOM with one event): everything is the state before it,
//   and nothing shows what the run allocates as it goes (an audit: "fits surely up to 65,410x" on such a file).
std::string incomplete_trace(const DeviceLifetimes& lt) {
  uint64_t bytes = 0;
  uint32_t count = 0, traced = 0;
  for (uint32_t i = 0; i < lt.count(); ++i) {
    if (lt.origin[i] == LifetimeOrigin::kFreedOnly) bytes += lt.size[i], ++count;
    traced += lt.origin[i] == LifetimeOrigin::kTraced;
  }
  const uint64_t peak = lt.total.empty() ? 0 : lt.total[lt.peak_step()];
  char note[440];
  if (count > 0 && bytes * 20 >= peak) {
    std::snprintf(note, sizeof note,
                  "the trace starts mid-run: %u allocations (%.1f MiB) made before its first event are freed in it "
                  "(a wrapped ring buffer, or recording started late), so what the run held before the trace, and its "
                  "peak there, are unknown: no verdict says it fits. Record from before the first step, with "
                  "max_entries large enough for a whole iteration",
                  count, static_cast<double>(bytes) / (1 << 20));
    return note;
  }
  if (traced == 0 && lt.count() > 0) {
    std::snprintf(note, sizeof note,
                  "the trace holds no allocation (%u event%s): what the run allocates as it runs, and what of it "
                  "grows with the batch, are unknown, so no verdict says it fits. Record memory history over a whole "
                  "iteration",
                  lt.event_count, lt.event_count == 1 ? "" : "s");
    return note;
  }
  return "";
}

// The verdict such a trace allows: not "fits"; "does not fit" only for a run at least as large as recorded (what
// the trace saw is then a floor).
Verdict incomplete_verdict(Verdict v, bool at_least_recorded) {
  if (v == Verdict::kFits || (v == Verdict::kDoesNotFit && !at_least_recorded)) return Verdict::kUnsure;
  return v;
}

// Each change's own error, added to the band: the largest error of its model on the tuning runs of
// tests/fixtures/plan_runs (gpt_sdpa, cnn, mlp: allocated peaks, and the least memory where measured), times 1.25,
// rounded up to a percent. The hold-out runs (gpt_attn, vit, llama_hf) were never used for these (docs/analyses.md
// reports both). Sharding could not be measured (no machine of several GPUs was lent): it keeps a wide 10%.
double change_band(const std::vector<WhatIfChange>& changes) {
  double band = 0;
  for (const WhatIfChange& c : changes) {
    switch (c.kind) {
      case WhatIfChange::Kind::kAccumulate: band += 0.07; break;  // cnn at 4 micro-batches: 6.2% low reserved
      case WhatIfChange::Kind::kPrecision: band += 0.05; break;   // cnn's least memory under autocast: 3.5% low
      case WhatIfChange::Kind::kCheckpoint: band += 0.09; break;  // cnn's least memory: 7.0% low
      case WhatIfChange::Kind::kOptimizer: band += 0.05; break;   // cnn with Adafactor: 3.7% low
      case WhatIfChange::Kind::kZeroGrad: band += 0.05; break;    // mlp: 3.8% low
      case WhatIfChange::Kind::kOffload: band += 0.03; break;     // cnn: 1.8% high
      case WhatIfChange::Kind::kAllocator: band += 0.05; break;   // cnn's reserved under max_split_size: 3.5% low
      case WhatIfChange::Kind::kShard: band += 0.10; break;
    }
  }
  return band;
}

}  // namespace whatif_detail
}  // namespace allocscope
