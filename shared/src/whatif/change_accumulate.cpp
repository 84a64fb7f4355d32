// Gradient accumulation over K micro-batches: each iteration's forward and backward played K times on batch/K, the
// gradients made by the first micro-batch's backward and the later ones' added into them.
//
// Why play the micro-batches rather than shrink one: what the allocator reserves follows the order of the requests.
// The first micro-batch's backward puts the gradients in the segments its activations free, and the next forward
// then finds them there. Shrinking one pass and taking the gradients as made where its forward starts (the model
// until 2026-12-06) kept allocated within 0.5% but read reserved low on 8 of 11 jobs (2 micro-batches: OPT 0.930,
// MobileNetV2 0.922, the CNN 0.942; 4: the CNN 0.886); the recordings of 2 micro-batches (plan_runs/JOB_acc2) replay
// to their own counters.
#include <algorithm>

#include "whatif/changes_impl.h"
#include "whatif/internal.h"
#include "whatif/run_model.h"

namespace allocscope::whatif_detail {
namespace {

// Micro-batches played: the first makes the gradients and the second adds into them; each later one frees and
// allocates as the second did. Two, not K (which can be 4096): three played gave the same 254 ratios of
// tests/fixtures/plan_runs to the byte, and each one played adds a pass of rows to every replay (`plan` on a 1M-event
// trace: 21.7 s before, 31.7 s with two, 35.3 s with three).
constexpr uint32_t kPlayed = 2;
struct Span {
  uint32_t begin = 0, end = 0;  // recorded ticks, whole steps: a forward and backward
};

// Each step's forward and backward, in whole steps: from an activation or input made after an optimizer step (or the
// trace's start) to the next optimizer step, which is its first allocation or, with PyTorch's annotations, the
// annotation (SGD with momentum allocates only in its first step). Read from the rows, not from the iterations
// alone: the capture's own boundaries (Iterations::Source::kBackwardCalls) are a backward's start, which a forward
// and its backward straddle. Without annotations or optimizer allocations, each iteration's first activation to
// its end.
std::vector<Span> passes(const RunModel& m) {
  const uint32_t n = m.count();
  std::vector<uint32_t> order;
  bool optimizer_rows = false;
  for (uint32_t i = 0; i < n; ++i)
    if (m.size[i] && !m.failed[i] && m.birth[i] > 0) {
      order.push_back(i);
      optimizer_rows = optimizer_rows || m.phase(i) == 3;
    }
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return m.birth[a] < m.birth[b]; });
  const bool annotated = m.iterations.source == Iterations::Source::kAnnotations;
  const bool by_region = !annotated && !optimizer_rows;
  std::vector<Span> out;
  auto close = [&](uint32_t begin, uint32_t end) {
    Span sp{begin - begin % RunModel::kTick, end - end % RunModel::kTick};
    if (sp.end > sp.begin && (out.empty() || sp.begin >= out.back().end)) out.push_back(sp);
  };
  bool open = false;
  uint32_t begin = 0, region = 0;
  for (uint32_t i : order) {
    const uint32_t r = m.region_of_tick(m.birth[i]);
    if (open && r != region && (annotated || by_region)) {  // an optimizer step's annotation, or the iteration's end
      close(begin, m.region_start(region + 1));
      open = false;
    }
    if (m.phase(i) == 3) {
      if (open) close(begin, m.birth[i]);
      open = false;
      continue;
    }
    if (!open && (m.category[i] == Category::kActivation || m.category[i] == Category::kInput)) {
      open = true;
      begin = m.birth[i];
      region = r;
    }
  }
  if (open) close(begin, annotated || by_region ? std::min(m.ticks, m.region_start(region + 1)) : m.ticks);
  return out;
}

}  // namespace

Status apply_accumulate(const WhatIfChange& c, RunModel* mp, std::string* what) {
  RunModel& m = *mp;
  const double k = c.value;
  if (k <= 1) {
    *what = "one micro-batch a step: no change";
    return {};
  }
  uint64_t grown = 0;
  for (uint32_t i = 0; i < m.count(); ++i)
    if (m.grows[i] && m.size[i]) {
      grown += m.size[i];
      m.size[i] = std::max<uint64_t>(1, scaled(m.size[i], 1.0 / k));
      // A staging buffer's split, in the micro-batch's units (its cap is the GPU's).
      for (int r = 0; r < m.staging[i].readings; ++r) {
        m.staging[i].reading[r].ctas /= static_cast<float>(k);
        m.staging[i].reading[r].split /= static_cast<float>(k);
      }
    }
  const std::vector<Span> spans = passes(m);
  const uint32_t n = m.count();
  // The span each row is born in (spans are in order and apart), and whether a pass makes gradients that outlive it.
  std::vector<uint32_t> span_of(n, UINT32_MAX);
  bool whole_step = false;
  for (uint32_t i = 0; i < n; ++i) {
    if (!m.size[i]) continue;
    auto it = std::upper_bound(spans.begin(), spans.end(), m.birth[i],
                               [](uint32_t t, const Span& s) { return t < s.begin; });
    if (it == spans.begin() || m.birth[i] >= std::prev(it)->end) continue;
    span_of[i] = static_cast<uint32_t>(std::prev(it) - spans.begin());
    whole_step = whole_step || (m.category[i] == Category::kGradient && m.death[i] != RunModel::kForever &&
                                m.death[i] > std::prev(it)->end);
  }
  // A trace with no iterations and no forward-and-backward seen whole shows nothing a second micro-batch would find,
  // unless the model completed the step an OOM cut short (complete_first_step: its gradients and the optimizer's
  // state made after it), whose pass then reads as a whole step's. Until 2026-12-06 such a trace answered "no
  // iterations found" too, which told a user whose job ran out of memory in its first step to record whole steps.
  if (!whole_step && m.iterations.source == Iterations::Source::kNone && !m.completed_first_step)
    return Error{"no iterations found in the trace, so when each step's forward starts is unknown: record a few whole "
                 "steps"};
  // Recorded tick -> model tick: each span before it adds its length once more (the second micro-batch).
  std::vector<uint64_t> added_after(spans.size());
  uint64_t added = 0;
  for (size_t q = 0; q < spans.size(); ++q) added_after[q] = added += spans[q].end - spans[q].begin;
  if (m.ticks + added >= RunModel::kForever) return Error{"the trace is too long to play its micro-batches"};
  auto moved = [&](uint32_t t) -> uint32_t {
    if (t == RunModel::kForever) return t;
    auto it = std::upper_bound(spans.begin(), spans.end(), t, [](uint32_t x, const Span& s) { return x < s.end; });
    return it == spans.begin() ? t : t + static_cast<uint32_t>(added_after[it - spans.begin() - 1]);
  };
  uint64_t grads = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t b = m.birth[i], d = m.death[i];
    m.birth[i] = moved(b);
    m.death[i] = moved(d);
    if (span_of[i] == UINT32_MAX) continue;
    const Span& s = spans[span_of[i]];
    const uint32_t len = s.end - s.begin;
    // Made once and kept (a library's workspace, a cache): not made again.
    if (d == RunModel::kForever) continue;
    const bool within = d <= s.end;
    const bool gradient = !within && m.category[i] == Category::kGradient;
    if (gradient) grads += m.size[i];
    // Within its pass, a row dies in the first micro-batch's (one freed as the pass ends, at its end). Outliving it,
    // a tensor other than a gradient is a variable the next micro-batch assigns again (the loss, the output): the
    // earlier one goes when the next is made.
    if (within) m.death[i] = d - b + m.birth[i];
    else if (!gradient) m.death[i] = m.birth[i] + len;
    // The second micro-batch's copy. Its gradient is added into the first's and freed (AccumulateGrad's in-place
    // add); a variable it makes lives as long as the recorded one did.
    const uint32_t born = m.birth[i] + len;
    const uint32_t g = m.copy_row(i, born, gradient ? born + 2 : within ? m.death[i] + len : moved(d));
    if (gradient) m.category[g] = Category::kAutogradDetail;
  }
  for (size_t q = 0; q < spans.size(); ++q) {
    const uint32_t len = spans[q].end - spans[q].begin;
    m.repeats.push_back({moved(spans[q].begin), len, kPlayed});
  }
  for (uint32_t& b : m.iterations.boundary) b = moved(m.tick(b)) / RunModel::kTick;
  m.iterations.steps = moved(m.tick(m.iterations.steps)) / RunModel::kTick;
  m.ticks = moved(m.ticks);
  const int kk = static_cast<int>(k);
  if (spans.empty()) {
    *what = "each micro-batch on 1/" + std::to_string(kk) + " of the batch (what grows with it: " + bytes_text(grown) +
            " over the trace); no forward of a training step found to play again (no activations the batch makes)";
    return {};
  }
  *what = "each step's forward and backward " + std::to_string(kk) + " times on 1/" + std::to_string(kk) +
          " of the batch (what grows with it: " + bytes_text(grown) + " over the trace)";
  if (kPlayed < static_cast<uint32_t>(kk))
    *what += ", the first " + std::to_string(kPlayed) + " replayed (each later one frees and allocates as the "
             "second)";
  if (grads)
    *what += "; the gradients (" + bytes_text(grads) + " over the trace) made by the first micro-batch's backward, "
             "each later one's added into them";
  return {};
}

}  // namespace allocscope::whatif_detail
