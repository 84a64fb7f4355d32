// What-if from two snapshots or more of the same loop at two sizes (whatif.h): pair their allocations, fit each
// one's size as c * size^k, predict the target.
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

using namespace whatif_detail;

std::vector<int64_t> pair_allocations(const Snapshot& a, const DeviceLifetimes& la, const Snapshot& b,
                                      const DeviceLifetimes& lb) {
  // Rows are paired by their stack (frame texts, since stack ids are per file) in trace order: the same loop
  // allocates the same sequence at any batch size, give or take a cached workspace.
  auto keys = [](const Snapshot& s, const DeviceLifetimes& lt) {
    // Each stack's frames hashed once (rows share stacks by the thousand).
    std::vector<size_t> of_stack(s.stacks.size(), 0);
    std::vector<uint8_t> done(s.stacks.size(), 0);
    std::vector<size_t> k(lt.count());
    for (uint32_t i = 0; i < lt.count(); ++i) {
      const StackId id = lt.stack[i];
      size_t h = 0;  // lifetimes of another snapshot (a stack id out of range): no frames to key on
      if (id < s.stacks.size()) {
        if (!done[id]) {
          for (FrameId f : s.stack(id)) {
            const Frame& fr = s.frames[f];
            of_stack[id] = of_stack[id] * 1000003u ^ std::hash<std::string_view>()(s.str(fr.name));
            // torch.compile's generated code lives in files named by a hash of the graph, and its lines move when
            // the shapes change a kernel's code: there the function alone is kept, and a graph's allocations pair
            // in order.
            const std::string_view file = s.str(fr.filename);
            if (generated_code_file(file)) continue;
            of_stack[id] = of_stack[id] * 1000003u ^ std::hash<std::string_view>()(file);
            // A script's top level (`<module>`) moves with any edit above the line that calls the loop: one differing
            // line there unpaired half of two runs' allocations. Its line is left out; its file stays.
            if (s.str(fr.name) == "<module>") continue;
            of_stack[id] = of_stack[id] * 1000003u ^ static_cast<size_t>(fr.line);
          }
          done[id] = 1;
        }
        h = of_stack[id];
      }
      k[i] = h * 0x9e3779b97f4a7c15ull ^ static_cast<size_t>(lt.origin[i]);
    }
    return k;
  };
  const std::vector<size_t> ka = keys(a, la), kb = keys(b, lb);
  // torch.compile's autotuning allocates a different number of buffers at each shape, all in the first step: left
  // out of the alignment, where hundreds more on one side outran the lookahead and left the rest of the compiled
  // GPT-2's trace unpaired (603 of 1,624 allocations; the prediction read 1.6x).
  auto steady = [](const Snapshot& s, const DeviceLifetimes& lt) {
    const std::vector<uint16_t> flags = stack_flags(s, lt);
    std::vector<uint32_t> rows;
    rows.reserve(lt.count());
    for (uint32_t i = 0; i < lt.count(); ++i)
      if (!(flags_at(flags, lt.stack[i]) & kAutotune)) rows.push_back(i);
    return rows;
  };
  const std::vector<uint32_t> ra = steady(a, la), rb = steady(b, lb);
  std::vector<int64_t> pair(lb.count(), -1);  // row of B -> row of A
  constexpr uint32_t kLookahead = 64;
  const uint32_t na = static_cast<uint32_t>(ra.size()), nb = static_cast<uint32_t>(rb.size());
  auto key_a = [&](uint32_t x) { return ka[ra[x]]; };
  auto key_b = [&](uint32_t y) { return kb[rb[y]]; };
  for (uint32_t i = 0, j = 0; i < na && j < nb;) {
    if (key_a(i) == key_b(j)) {
      pair[rb[j++]] = ra[i++];
      continue;
    }
    // Skip whichever side reaches a match sooner.
    uint32_t di = kLookahead + 1, dj = kLookahead + 1;
    for (uint32_t d = 1; d <= kLookahead && i + d < na; ++d)
      if (key_a(i + d) == key_b(j)) { di = d; break; }
    for (uint32_t d = 1; d <= kLookahead && j + d < nb; ++d)
      if (key_b(j + d) == key_a(i)) { dj = d; break; }
    if (di <= dj && di <= kLookahead) i += di;
    else if (dj <= kLookahead) j += dj;
    else ++i, ++j;
  }
  return pair;
}

namespace {

// what_if_fit; `with_needs` = false skips the least-memory bisection (a dozen replays) for fits only read for their
// allocated peak (what_if_fit_runs' checks).
Result<WhatIfFit> fit_pair(const Snapshot& a, const DeviceLifetimes& la, const Snapshot& b, const DeviceLifetimes& lb,
                           double size_a, double size_b, double target, const std::optional<GpuCapacity>& gpu,
                           bool with_needs) {
  if (!(size_a > 0 && size_b > 0 && target > 0) || size_a == size_b)
    return Error{"the two sizes must be positive and different, and the target positive"};
  const std::vector<int64_t> pair = pair_allocations(a, la, b, lb);  // row of B -> row of A
  WhatIfFit out;
  out.size_a = size_a;
  out.size_b = size_b;
  out.target = target;
  std::vector<uint64_t> sizes(lb.size);
  const double span = std::log(size_b / size_a);
  const std::vector<uint16_t> flags = stack_flags(b, lb);
  std::vector<uint32_t> unpaired;
  uint32_t autotune = 0;
  for (uint32_t j = 0; j < lb.count(); ++j) {
    if (pair[j] < 0) {
      unpaired.push_back(j);
      if (flags_at(flags, lb.stack[j]) & kAutotune) ++autotune;
      continue;
    }
    ++out.paired;
    const double sa = static_cast<double>(la.size[static_cast<uint32_t>(pair[j])]), sb = static_cast<double>(lb.size[j]);
    if (sa <= 0 || sb <= 0 || sa == sb) continue;
    // size = c * x^k through both points; k clamped to what loops do (constant .. cubic).
    // cuDNN picks a convolution algorithm per shape, so its workspace jumps between sizes: take it as linear.
    const double k = (flags_at(flags, lb.stack[j]) & kCudnnWorkspace) ? 1.0 : std::clamp(std::log(sb / sa) / span, 0.0, 3.0);
    sizes[j] = capped(sb * std::pow(target / size_b, k));
  }
  out.unpaired = static_cast<uint32_t>(unpaired.size());
  if (out.paired < lb.count() / 2)
    return Error{"the two snapshots do not look like the same loop: only " + std::to_string(out.paired) + " of " +
                 std::to_string(lb.count()) + " allocations pair up"};
  // What has no partner is scaled as one snapshot would scale it (linearly where it grows with the batch), and for
  // the verdict anywhere from constant to linear: what pairs is the loop itself (attention's t^2 scores included);
  // what does not is what the shapes pick (a reduction's staging buffers, cuDNN's workspaces, torch.compile's
  // autotuning), which grows with its input at most.
  const double rho = target / size_b;
  std::vector<uint64_t> low, high;
  if (!unpaired.empty()) {
    auto c = categorize(b, lb, detect_iterations(b, lb), FrameFilter(b));
    if (c.ok()) {
      const std::vector<uint8_t> grows = batch_dependent_rows(b, lb, c.value());
      for (uint32_t j : unpaired)
        if (grows[j]) sizes[j] = scaled(lb.size[j], rho);
    }
    low = high = sizes;
    for (uint32_t j : unpaired) {
      low[j] = scaled(lb.size[j], std::min(1.0, rho));
      high[j] = scaled(lb.size[j], std::max(1.0, rho));
    }
  }
  out.measured_allocated_a = replay_caching_allocator(la, la.size).peak_allocated;
  out.measured_allocated_b = replay_caching_allocator(lb, lb.size).peak_allocated;
  const AllocatorReplay p = replay_caching_allocator(lb, sizes);
  out.predicted_allocated = p.peak_allocated;
  out.predicted_reserved = p.peak_reserved;
  // The replayed run's failed requests are tried too, at their recorded size, for a target at least its size.
  std::optional<DeviceLifetimes> with_failed;
  if (target >= size_b) with_failed = with_failed_requests(b, lb);
  const DeviceLifetimes& rl = with_failed ? *with_failed : lb;
  std::vector<uint8_t> optional = optional_rows(b, lb);
  optional.resize(rl.count(), 0);
  for (auto* v : {&sizes, &low, &high})
    if (!v->empty())
      for (uint32_t j = lb.count(); j < rl.count(); ++j) v->push_back(rl.size[j]);
  const uint64_t failed_need = failed_floor(lb, with_failed);
  const ReplayOrder order_rl = replay_order(rl);
  if (with_needs || gpu)
    out.predicted_needed = std::max(least_allocator_room(rl, order_rl, sizes, &optional), failed_need);
  const double largest = std::max(size_a, size_b), smallest = std::min(size_a, size_b);
  const double beyond = target > largest ? target / largest : target < smallest ? target / smallest : 1.0;
  if (gpu) {
    out.gpu = gpu;
    // Between the two sizes, the nearer one is the distance that counts.
    const double nearest = beyond != 1.0 ? beyond : std::min(target / smallest, largest / target);
    // The replayed run's own OOM, for a target at least its size (as with one snapshot).
    const Decision d = decide(rl, order_rl, unpaired.empty() ? sizes : low, sizes, unpaired.empty() ? sizes : high,
                              out.predicted_needed, error_band(nearest), allocator_room(*gpu), &optional,
                              b.expandable_segments(), failed_need, target >= size_b ? room_at_oom(b, lb, gpu) : 0);
    out.verdict = d.verdict;
    out.needed_low = d.low;
    out.needed_high = d.high;
    out.fits = out.verdict == Verdict::kFits;
  }
  for (const DeviceLifetimes* l : {&la, &lb}) {
    const std::string why = incomplete_trace(*l);
    if (why.empty()) continue;
    out.trace_incomplete = true;
    if (gpu) {
      out.verdict = incomplete_verdict(out.verdict, target >= largest);
      out.fits = false;
    }
    out.notes.insert(out.notes.begin(), (l == &la ? "the first snapshot: " : "the second snapshot: ") + why);
  }
  note_extrapolation(beyond, &out.notes);
  if (out.unpaired) {
    std::string note = std::to_string(out.unpaired) + " allocations of the second snapshot have no partner in the "
                       "first";
    if (autotune) note += " (" + std::to_string(autotune) + " of them torch.compile's autotuning, which allocates "
                          "differently at each shape)";
    out.notes.push_back(note + ": scaled as one snapshot would scale them, and taken as anywhere from constant to "
                               "linear in the size for the verdict");
  }
  out.notes.push_back("each allocation's size is fitted as c * size^k through the two snapshots; reserved is "
                      "modelled on PyTorch's caching allocator");
  return out;
}

}  // namespace

Result<WhatIfFit> what_if_fit(const Snapshot& a, const DeviceLifetimes& la, const Snapshot& b,
                              const DeviceLifetimes& lb, double size_a, double size_b, double target,
                              const std::optional<GpuCapacity>& gpu) {
  return fit_pair(a, la, b, lb, size_a, size_b, target, gpu, /*with_needs=*/true);
}

Result<WhatIfFit> what_if_fit_runs(std::vector<WhatIfRun> runs, double target, const std::optional<GpuCapacity>& gpu) {
  if (runs.size() < 2) return Error{"a fit needs two snapshots or more"};
  std::sort(runs.begin(), runs.end(), [](const WhatIfRun& x, const WhatIfRun& y) { return x.size < y.size; });
  for (size_t i = 1; i < runs.size(); ++i)
    if (!(runs[i].size > runs[i - 1].size)) return Error{"the snapshots' sizes must all be different"};
  // A run at a larger batch or length holds more at its peak. Sizes given in the other order than the files (an
  // audit: "--sizes 8,4" for files at 4 and 8 predicted batch 16 to fit where it does not) show as a larger size
  // holding clearly less; the same file twice, as nothing growing at all.
  for (size_t i = 1; i < runs.size(); ++i) {
    const DeviceLifetimes& x = *runs[i - 1].lifetimes;
    const DeviceLifetimes& y = *runs[i].lifetimes;
    const double px = x.total.empty() ? 0 : static_cast<double>(x.total[x.peak_step()]);
    const double py = y.total.empty() ? 0 : static_cast<double>(y.total[y.peak_step()]);
    char why[240];
    if (py < 0.95 * px) {
      std::snprintf(why, sizeof why,
                    "the snapshot given size %g holds %.1f MiB at its peak, less than the one given size %g (%.1f "
                    "MiB): are --sizes in the files' order?",
                    runs[i].size, py / (1 << 20), runs[i - 1].size, px / (1 << 20));
      return Error{why};
    }
    if (runs[i].snapshot == runs[i - 1].snapshot ||
        (py == px && x.count() == y.count() && x.event_count == y.event_count && x.size == y.size)) {
      std::snprintf(why, sizeof why,
                    "the snapshots given sizes %g and %g hold exactly the same allocations: the same run twice?",
                    runs[i - 1].size, runs[i].size);
      return Error{why};
    }
  }
  // The pair nearest the target; the fit's base (b) is the one nearer to it, whose trace is replayed.
  size_t lo = 0;
  if (target >= runs.back().size) lo = runs.size() - 2;
  else if (target > runs.front().size)
    while (runs[lo + 1].size < target) ++lo;
  size_t a = lo, b = lo + 1;
  if (std::abs(std::log(target / runs[a].size)) < std::abs(std::log(target / runs[b].size))) std::swap(a, b);
  auto fit = what_if_fit(*runs[a].snapshot, *runs[a].lifetimes, *runs[b].snapshot, *runs[b].lifetimes, runs[a].size,
                         runs[b].size, target, gpu);
  if (!fit.ok() || runs.size() == 2) return fit;
  WhatIfFit out = std::move(fit).value();
  for (const WhatIfRun& r : runs) out.sizes.push_back(r.size);
  for (size_t i = 2; i < runs.size(); ++i) {
    auto c = fit_pair(*runs[i - 2].snapshot, *runs[i - 2].lifetimes, *runs[i - 1].snapshot, *runs[i - 1].lifetimes,
                      runs[i - 2].size, runs[i - 1].size, runs[i].size, std::nullopt, /*with_needs=*/false);
    if (!c.ok()) {  // the prediction stands; only this check could not be made
      char note[120];
      std::snprintf(note, sizeof note, "the check from %g and %g to %g could not be made: ", runs[i - 2].size,
                    runs[i - 1].size, runs[i].size);
      out.notes.push_back(note + c.error().message);
      continue;
    }
    WhatIfFit::Check k;
    k.size_a = runs[i - 2].size;
    k.size_b = runs[i - 1].size;
    k.size = runs[i].size;
    k.predicted_allocated = c.value().predicted_allocated;
    k.measured_allocated = replay_caching_allocator(*runs[i].lifetimes, runs[i].lifetimes->size).peak_allocated;
    out.checks.push_back(k);
  }
  double worst = 0;
  for (const WhatIfFit::Check& k : out.checks)
    if (k.measured_allocated)
      worst = std::max(worst, std::abs(static_cast<double>(k.predicted_allocated) / k.measured_allocated - 1));
  char note[200];
  std::snprintf(note, sizeof note,
                "fitted on the two snapshots nearest the target; predicting each larger snapshot from the two below "
                "it was off by up to %.1f%% in this job",
                worst * 100);
  out.notes.push_back(note);
  return out;
}

}  // namespace allocscope
