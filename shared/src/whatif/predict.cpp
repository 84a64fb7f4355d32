// What-if from one snapshot (whatif.h): scale what grows with the batch, replay, and ask the allocator model for
// reserved and for the least memory the run needs.
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
#include "allocscope/segment_timeline.h"
#include "whatif/changes_impl.h"
#include "whatif/internal.h"
#include "whatif/run_model.h"

namespace allocscope {

using namespace whatif_detail;

namespace {

// The default settings, with where the recording's driver mapped its segments (AllocatorSettings::segment_addresses)
// when the replay starts from what the recording started from: no allocation alive before the trace (whose segments'
// order is unknown), no expandable segments (which map pages, not segments).
AllocatorSettings recorded_placement(const Snapshot& s, const DeviceLifetimes& lt) {
  AllocatorSettings out;
  if (s.expandable_segments()) return out;
  for (uint32_t i = 0; i < lt.count(); ++i)
    if (lt.alloc_event[i] == kNoEvent) return out;
  for (uint32_t e = 0; e < lt.event_count; ++e)
    if (s.events.action[lt.event_begin + e] == Action::kSegmentAlloc)
      out.segment_addresses.push_back({s.events.addr[lt.event_begin + e], s.events.size[lt.event_begin + e]});
  return out;
}

}  // namespace

WhatIfReport what_if(const Snapshot& s, const DeviceLifetimes& lt, const Categories& c, const WhatIfOptions& options) {
  WhatIfReport r;
  r.device = lt.device;
  r.batch = options.batch;
  r.seq = options.seq;
  const uint32_t n = lt.count();

  // The measured terms at the highest step of each phase; a step's phase is that of the allocation made there.
  std::vector<int32_t> born(lt.steps(), -1);
  for (uint32_t i = 0; i < n; ++i)
    if (lt.alloc_event[i] != kNoEvent) born[lt.birth_step(i)] = static_cast<int32_t>(i);
  auto phase_of = [&](uint32_t row) -> int {
    switch (c.reason[row]) {
      case CategoryReason::kForwardFrame: return 1;
      case CategoryReason::kBackwardFrame:
      case CategoryReason::kEngineThread: return 2;
      case CategoryReason::kOptimizerFrame: return 3;
      default: return c.category[row] == Category::kInput ? 1 : 0;
    }
  };
  static const char* kPhase[] = {"peak", "forward", "backward", "optimizer step"};
  std::vector<uint32_t> best(4, UINT32_MAX);
  best[0] = lt.peak_step();
  int phase = 0;
  for (uint32_t step = 0; step < lt.steps(); ++step) {
    if (born[step] >= 0) phase = phase_of(static_cast<uint32_t>(born[step]));
    if (phase && (best[phase] == UINT32_MAX || lt.total[step] > lt.total[best[phase]])) best[phase] = step;
  }
  for (int k = 0; k < 4; ++k) {
    if (best[k] == UINT32_MAX || lt.total.empty()) continue;
    WhatIfTerms t;
    t.phase = kPhase[k];
    t.step = best[k];
    for (uint32_t i = 0; i < n; ++i) {
      if (!lt.alive_at(i, t.step)) continue;
      const uint64_t b = lt.size[i];
      t.total += b;
      switch (c.category[i]) {
        case Category::kParameter: t.parameters += b; break;
        case Category::kGradient: t.gradients += b; break;
        case Category::kOptimizerState: t.optimizer_state += b; break;
        case Category::kActivation:
        case Category::kInput: t.activations += b; break;
        case Category::kTemporary:
        case Category::kAutogradDetail: t.temporaries += b; break;
        default: t.other += b;
      }
    }
    r.terms.push_back(t);
  }

  const std::vector<uint8_t> grows = batch_dependent_rows(s, lt, c);
  // Reductions' staging buffers stop growing where the GPU's blocks run out: known only when the GPU is.
  const std::vector<StagingBound> staging =
      staging_bounds(lt, stack_flags(s, lt), options.gpu ? options.gpu->resident_threads : 0);
  const uint32_t peak = lt.peak_step();
  for (uint32_t i = 0; i < n; ++i)
    if (grows[i] && lt.alive_at(i, peak)) r.scaled_bytes_at_peak += lt.size[i];
  const AllocatorReplay replayed = replay_caching_allocator(lt, lt.size, 0, nullptr, recorded_placement(s, lt));
  r.replayed_allocated = replayed.peak_allocated;
  r.replayed_reserved = replayed.peak_reserved;
  r.measured_allocated = lt.total.empty() ? 0 : lt.total[lt.peak_step()];
  const SegmentTimeline segments = build_segment_timeline(s, lt.device);
  r.measured_reserved = segments.total.empty() ? 0 : *std::max_element(segments.total.begin(), segments.total.end());
  const double factor = options.batch * options.seq;

  // The run to predict: the recorded rows, with the requests that failed (with_failed_requests: tried in a run at
  // least as long as recorded), or the model the changes make of them (run_model.h).
  std::optional<DeviceLifetimes> with_failed;
  if (options.seq >= 1.0) with_failed = with_failed_requests(s, lt);
  DeviceLifetimes changed;
  std::vector<uint8_t> run_grows, failed, optional;
  std::vector<StagingBound> run_staging;
  AllocatorSettings settings;
  // A trace an OOM cut short in its first step goes through the model too, which completes the step.
  const auto events = s.events.action.begin() + lt.event_begin;
  const bool ran_out = std::any_of(events, events + lt.event_count, [](Action a) { return a == Action::kOom; });
  RunModel model;
  if (!options.changes.empty() || ran_out) model = build_run_model(s, lt, c, grows, staging, with_failed ? &*with_failed : nullptr);
  const Cut cut = ran_out ? first_step_cut(model) : Cut::kNone;
  const double cut_band = cut == Cut::kInForward ? kCutInForwardBand : cut == Cut::kInBackward ? kCutInBackwardBand : 0;
  const bool has_changes = !options.changes.empty() || cut != Cut::kNone;
  if (has_changes) {
    if (cut != Cut::kNone) complete_first_step(&model, &r.effects);
    // Gradient accumulation last: it plays each forward and backward again as the other changes made them.
    std::vector<WhatIfChange> in_order(options.changes);
    std::stable_partition(in_order.begin(), in_order.end(),
                          [](const WhatIfChange& c) { return c.kind != WhatIfChange::Kind::kAccumulate; });
    for (const WhatIfChange& change : in_order) {
      if (Status st = apply_change(change, &model, &r.effects); !st.ok()) {
        r.error = st.error().message;
        return r;
      }
    }
    changed = model_lifetimes(model);
    run_grows = model.grows;
    run_staging = model.staging;
    failed = model.failed;
    optional = model.optional;
    settings = model.settings;
    if (!settings.expandable_segments) settings.segment_addresses = recorded_placement(s, lt).segment_addresses;
    r.changes = options.changes;
    const AllocatorReplay at = replay_caching_allocator(
        changed, scaled_sizes(changed, run_grows, factor, options.seq, &run_staging), 0, nullptr, settings);
    r.predicted_terms = model_terms(model, at.peak_allocated_step, factor, options.seq);
  } else {
    const DeviceLifetimes& rows = with_failed ? *with_failed : lt;
    run_grows = grows;
    run_grows.resize(rows.count(), 0);
    run_staging = staging;
    run_staging.resize(rows.count());
    failed.assign(rows.count(), 0);
    for (uint32_t i = lt.count(); i < rows.count(); ++i) failed[i] = 1;
    optional = optional_rows(s, lt);
    optional.resize(rows.count(), 0);
    settings = recorded_placement(s, lt);
  }
  const DeviceLifetimes& rl = has_changes ? changed : with_failed ? *with_failed : lt;
  const bool failed_rows = std::find(failed.begin(), failed.end(), 1) != failed.end();
  // The run's rows scaled, without the failed requests (what it allocates when nothing fails).
  std::vector<uint64_t> sizes = scaled_sizes(rl, run_grows, factor, options.seq, &run_staging);
  for (uint32_t i = 0; i < rl.count(); ++i)
    if (failed[i]) sizes[i] = 0;
  const AllocatorReplay predicted = replay_caching_allocator(rl, sizes, 0, nullptr, settings);
  if (options.with_totals && !has_changes) {
    // A difference array over steps: each row adds its size while alive.
    std::vector<int64_t> delta(lt.steps() + 1, 0);
    for (uint32_t i = 0; i < n; ++i) {
      delta[lt.birth_step(i)] += static_cast<int64_t>(sizes[i]);
      delta[std::min(lt.death_step(i), lt.steps())] -= static_cast<int64_t>(sizes[i]);
    }
    r.predicted_total.resize(lt.steps());
    int64_t run = 0;
    for (uint32_t step = 0; step < lt.steps(); ++step) r.predicted_total[step] = static_cast<uint64_t>(run += delta[step]);
  }
  r.predicted_allocated = predicted.peak_allocated;
  r.predicted_reserved = predicted.peak_reserved;
  r.predicted_peak_step =
      has_changes ? model.recorded_tick(predicted.peak_allocated_step) / RunModel::kTick : predicted.peak_allocated_step;
  // The requests that failed are tried too. A run at least as large as recorded makes them at their recorded size.
  // A smaller batch may make them smaller (if they grow with it) or not: the prediction takes them as growing, the
  // high end of its range as they were. (They were left out below the recorded batch: an audit's OOM trace, which
  // asked 95 GiB of an 80 GB GPU, was said to fit at 0.9x.)
  const bool smaller = options.batch < 1.0;
  std::vector<uint8_t> grows_point(run_grows), grows_high(run_grows), grows_shrinking(run_grows);
  for (uint32_t i = 0; i < rl.count(); ++i)
    if (failed[i]) {
      grows_point[i] = smaller ? 1 : 0;
      grows_high[i] = 0;
      grows_shrinking[i] = 1;
    }
  const std::vector<uint64_t> sizes_rl = scaled_sizes(rl, grows_point, factor, options.seq, &run_staging);
  const ReplayOrder order_rl = replay_order(rl);  // for every replay of rl below (bisections)
  r.predicted_needed = least_allocator_room(rl, order_rl, sizes_rl, &optional, settings);
  // What was alive at a failure plus the request is a measured floor (the replay of a fragmenting run can need more),
  // for a run at least as large as recorded and unchanged (a change can need less than what failed).
  const uint64_t failed_need = smaller || !options.changes.empty() ? 0 : failed_floor(lt, with_failed);
  if (failed_need > r.predicted_needed) {
    r.predicted_needed = failed_need;
    char note[200];
    std::snprintf(note, sizeof note,
                  "the trace ran out of memory: the run needed at least %.1f MiB (what was alive then and what it "
                  "asked for), more than the replay finds",
                  static_cast<double>(failed_need) / (1 << 20));
    r.notes.push_back(note);
  }
  if (factor > 1.0 && !(options.gpu && options.gpu->resident_threads) &&
      std::find(grows.begin(), grows.end(), kGrowsStaging) != grows.end())
    r.notes.push_back("reductions' staging buffers are scaled with the batch all the way: on a GPU they stop growing "
                      "once their blocks fill it; name the GPU to cap them");
  // The scale farther from 1 (a longer sequence at a smaller batch is still far from what was recorded).
  const bool batch_farther = std::fabs(std::log(options.batch)) >= std::fabs(std::log(options.seq));
  if (options.gpu) {
    r.gpu = options.gpu;
    const uint64_t room = allocator_room(*options.gpu);
    // Not the unconstrained reserved peak: short of memory, PyTorch frees its cache and goes on (measured: runs
    // trained in up to 35% less than that peak). The replay under the GPU's room says whether it still runs out.
    // Conservative where the two disagree (running out of memory is not strictly monotone in the cap).
    // With a sequence scale, one snapshot cannot tell linear activations from attention's t^2 scores: the sizes
    // that grow are bracketed between the two.
    // The distance from the recording counts both scales (twice the batch at twice the length is four times the
    // tokens); each change adds its own error (change_band).
    // A cut first step leaves the rest of its forward and backward unknown: a wider band (cut_band above).
    const double changes_band = change_band(options.changes);
    auto band_at = [&](double b) {
      return std::min(0.5, error_band(std::exp2(std::fabs(std::log2(b)) + std::fabs(std::log2(options.seq)))) +
                               changes_band);
    };
    const double q2 = options.seq * options.seq;
    auto low_at = [&](double b) { return scaled_sizes(rl, grows_point, b * std::min(options.seq, q2), 1.0, &run_staging); };
    auto high_at = [&](double b) { return scaled_sizes(rl, grows_high, b * std::max(options.seq, q2), 1.0, &run_staging); };
    // The room the recorded run ran out in binds a run at least as large and unchanged only.
    const uint64_t oom_room = options.seq >= 1.0 && options.changes.empty() ? room_at_oom(s, lt, options.gpu) : 0;
    const uint64_t oom_room_here = options.batch >= 1.0 ? oom_room : 0;
    const bool expandable = s.expandable_segments() || settings.expandable_segments;
    Decision d;
    if (options.seq != 1.0 || (failed_rows && smaller)) {
      d = decide(rl, order_rl, low_at(options.batch), sizes_rl, high_at(options.batch), r.predicted_needed,
                 band_at(options.batch), room, &optional, expandable, failed_need, oom_room_here, settings, cut_band);
    } else {
      d = decide(rl, order_rl, sizes_rl, sizes_rl, sizes_rl, r.predicted_needed, band_at(options.batch), room,
                 &optional, expandable, failed_need, oom_room_here, settings, cut_band);
    }
    if (oom_room_here && room <= oom_room_here) {
      char note[220];
      std::snprintf(note, sizeof note,
                    "the recorded run ran out of memory with %.1f GiB for its allocator (reserved plus the driver's "
                    "free bytes): a GPU with no more room runs out at this batch too",
                    static_cast<double>(oom_room) / (1ull << 30));
      r.notes.push_back(note);
    }
    r.verdict = d.verdict;
    r.needed_low = d.low;
    r.needed_high = d.high;
    r.fits = r.verdict == Verdict::kFits;
    // The largest batch scale (the sequence scale held) that fits, as a range like the least memory: by the
    // prediction itself (its sizes under the GPU's room), and surely (the high end of the sizes under the room less
    // the error band). What a run needs grows with the batch, so each is a bisection over capped replays; running
    // out is not strictly monotone in the cap, so a boundary is where one replay fits and the next does not.
    auto largest = [&](auto&& fits_at) {
      double lo = 0, hi = 1;
      while (hi < 65536 && fits_at(hi)) lo = hi, hi *= 2;
      if (lo == 0) {  // below the recorded batch: halve down to a thousandth of it
        while (hi > 1e-3 && !fits_at(hi / 2)) hi /= 2;
        if (hi <= 1e-3) return 0.0;
        lo = hi / 2;
      }
      for (int k = 0; k < 20 && hi - lo > 0.002 * hi; ++k) {
        const double mid = (lo + hi) / 2;
        (fits_at(mid) ? lo : hi) = mid;
      }
      return lo;
    };
    // A run at or above the recorded size makes the requests that failed at their size, whatever batch was asked
    // about, and needs what was alive at its failure (an audit: asked at 0.9x, an OOM trace was said to fit "surely"
    // at 1.13x to 65,000x on the GPU it failed on); below it, they may shrink with the batch by the prediction, and
    // do not by the sure end. A GPU with no room past the context fits nothing.
    const uint64_t failed_need_all = !options.changes.empty() ? 0 : failed_floor(lt, with_failed);
    auto fits_capped = [&](double b, double scale, uint64_t cap, bool sure) {
      if (cap == 0) return false;
      if (failed_rows && b >= 1.0 && failed_need_all > cap) return false;
      if (oom_room && b >= 1.0 && room <= oom_room) return false;
      const std::vector<uint8_t>& g = !failed_rows ? run_grows : (b >= 1.0 || sure) ? grows_high : grows_shrinking;
      // The sure end's scale brackets linear and quadratic already (q2 on everything that grows).
      return !replay_caching_allocator(rl, order_rl, scaled_sizes(rl, g, scale, sure ? 1.0 : options.seq, &run_staging), cap,
                                       &optional, settings)
                  .out_of_memory;
    };
    if (options.largest_batch) {
      r.max_batch_scale = largest([&](double b) { return fits_capped(b, b * options.seq, room, false); });
      r.max_batch_scale_sure = largest([&](double b) {
        const double cap = static_cast<double>(room) / (1.0 + band_at(b) + cut_band);
        return fits_capped(b, b * std::max(options.seq, q2), static_cast<uint64_t>(cap), true);
      });
    }
    r.max_batch_scale_sure = std::min(r.max_batch_scale_sure, r.max_batch_scale);
    // Both agree with the verdict on the batch asked about (the bisections test other points): FITS has the sure
    // end at or above it, DOES NOT FIT the prediction's end below it, UNSURE lies between them.
    if (r.verdict == Verdict::kFits) {
      r.max_batch_scale_sure = std::max(r.max_batch_scale_sure, options.batch);
      r.max_batch_scale = std::max(r.max_batch_scale, options.batch);
    } else {
      r.max_batch_scale_sure = std::min(r.max_batch_scale_sure, options.batch * 0.995);
      if (r.verdict == Verdict::kDoesNotFit) r.max_batch_scale = std::min(r.max_batch_scale, options.batch * 0.995);
      else r.max_batch_scale = std::max(r.max_batch_scale, options.batch);
    }
  }
  if (const std::string why = incomplete_trace(lt); !why.empty()) {
    r.trace_incomplete = true;
    if (r.gpu) {
      r.verdict = incomplete_verdict(r.verdict, options.batch >= 1.0 && options.seq >= 1.0);
      r.fits = false;
      r.max_batch_scale_sure = 0;  // nothing is sure; the prediction's own end stays, marked as such
    }
    r.notes.insert(r.notes.begin(), why);
  }
  // The distance counts both scales (twice the batch at twice the length is four times the tokens), as the error band
  // does; an audit found --batch 2 --seq 2 without the note.
  const double distance = std::exp2(std::fabs(std::log2(options.batch)) + std::fabs(std::log2(options.seq)));
  note_extrapolation(batch_farther ? (options.batch >= 1 ? distance : 1 / distance)
                                   : (options.seq >= 1 ? distance : 1 / distance),
                     &r.notes);
  if (r.gpu && r.max_batch_scale_sure > 8.0) {
    char note[200];
    std::snprintf(note, sizeof note,
                  "the largest batch that fits is %.3gx the recorded one: nothing was measured past 8x, so past there "
                  "it is the model's reading, not a checked one",
                  r.max_batch_scale_sure);
    r.notes.push_back(note);
  }
  if (options.seq != 1.0) {
    uint64_t squared = 0;
    for (uint32_t i = 0; i < rl.count(); ++i)
      if (run_grows[i] == kGrowsSquared) squared += rl.size[i];
    r.notes.push_back(
        (squared ? "sequence length: attention written out keeps tensors of its softmax's size (" + bytes_text(squared) +
                       " over the trace), taken to grow with the length's square, the rest linearly"
                 : std::string("sequence length scales activations linearly here (no written-out attention's softmax "
                               "in the stacks: fused attention keeps nothing that grows with the length's square)")) +
        "; the verdict takes what grows as anywhere from linear to quadratic in it: give two snapshots at two lengths "
        "(whatif A B --sizes ...) to follow them");
  }
  if (s.expandable_segments())
    r.notes.push_back("expandable_segments is on: reserved is modelled for the default allocator and is an upper "
                      "bound");
  r.notes.push_back("reserved is modelled on PyTorch's caching allocator (default settings, freeing its cache before it "
                    "runs out of memory), and fitting leaves " + std::to_string(kTypicalContextBytes >> 20) +
                    " MiB for the CUDA context");
  return r;
}

}  // namespace allocscope
