// Iteration boundaries for the leak and category analyses: optimizer-step annotations, else the trace's period.
#include <algorithm>
#include <unordered_map>

#include "allocscope/frame_filter.h"
#include "allocscope/iterations.h"
#include "allocscope/timeline.h"

namespace allocscope {

uint32_t Iterations::region_of(uint32_t step) const {
  return static_cast<uint32_t>(std::upper_bound(boundary.begin(), boundary.end(), step) - boundary.begin());
}

RegionIndex::RegionIndex(const Iterations& it) : b_(it.boundary) {
  if (b_.empty()) return;
  // About four buckets per boundary, so that a bucket holds none or one in a loop of even steps.
  const uint64_t span = uint64_t{b_.back()} + 1;
  while ((span >> shift_) > 4 * uint64_t{b_.size()} + 64) ++shift_;
  const size_t buckets = static_cast<size_t>((span >> shift_) + 1);
  first_.resize(buckets + 1);
  size_t r = 0;
  for (size_t j = 0; j <= buckets; ++j) {
    const uint64_t start = uint64_t{j} << shift_;
    while (r < b_.size() && b_[r] < start) ++r;
    first_[j] = static_cast<uint32_t>(r);
  }
}

uint32_t RegionIndex::count(uint32_t step, bool or_equal) const {
  if (b_.empty()) return 0;
  const size_t j = step >> shift_;
  if (j + 1 >= first_.size()) return static_cast<uint32_t>(b_.size());  // past the last boundary's bucket
  // The boundaries in step's bucket are b_[first_[j], first_[j + 1]): all before it are below step, all after
  // it above.
  auto lo = b_.begin() + first_[j], hi = b_.begin() + first_[j + 1];
  auto at = or_equal ? std::upper_bound(lo, hi, step) : std::lower_bound(lo, hi, step);
  return static_cast<uint32_t>(at - b_.begin());
}

std::string_view iteration_source_name(Iterations::Source s) {
  switch (s) {
    case Iterations::Source::kAnnotations: return "annotations";
    case Iterations::Source::kPeriodic: return "periodic";
    case Iterations::Source::kBackwardCalls: return "backward() calls";
    default: return "none";
  }
}

namespace {

void from_annotations(const Snapshot& s, const DeviceLifetimes& lt, Iterations* it) {
  const TimeAxis axis = TimeAxis::for_device(s, lt);
  StringId name = 0;
  for (const Annotation& a : s.annotations) {
    if (!a.start || a.device != lt.device) continue;
    const std::string_view n = s.str(a.name);
    if (n.rfind("Optimizer.step", 0) != 0) continue;
    // Annotations are not trimmed to the trace window: steps outside it tell nothing about the recorded events.
    if (a.time_us < axis.first_us() || a.time_us > axis.last_us()) continue;
    if (name == 0) name = a.name;
    if (a.name != name) continue;  // two optimizers: follow the first one's steps
    it->boundary.push_back(axis.events_before(static_cast<double>(a.time_us)));
  }
  std::sort(it->boundary.begin(), it->boundary.end());
  it->boundary.erase(std::unique(it->boundary.begin(), it->boundary.end()), it->boundary.end());
  // One step inside the window is still the program's own word: one optimizer step was recorded, so the trace
  // holds at most two partial iterations. Guessing a period instead found transformer layers (24-32 "iterations"
  // in the cs336 files, which each hold one `Optimizer.step`).
  if (!it->boundary.empty()) {
    it->source = Iterations::Source::kAnnotations;
    it->marker = std::string(s.str(name));
  }
}

// The start of each backward() the capture's bootstrap lent frames for (three at least inside the trace): the
// program's own steps when it has no optimizer annotations (a capture with PyTorch's recorder off).
void from_backward_calls(const Snapshot& s, const DeviceLifetimes& lt, Iterations* it) {
  StringId backward = 0;
  if (s.lent_windows.empty() || !s.strings.find("backward", &backward)) return;
  const TimeAxis axis = TimeAxis::for_device(s, lt);
  std::vector<uint32_t> b;
  for (const LentWindow& w : s.lent_windows) {
    if (w.kind != backward || w.start_us < axis.first_us() || w.start_us > axis.last_us()) continue;
    b.push_back(axis.events_before(static_cast<double>(w.start_us)));
  }
  std::sort(b.begin(), b.end());
  b.erase(std::unique(b.begin(), b.end()), b.end());
  if (b.size() < 3) return;
  it->boundary = std::move(b);
  it->source = Iterations::Source::kBackwardCalls;
  it->marker = "backward()";
}

void from_period(const Snapshot& s, const DeviceLifetimes& lt, Iterations* it) {
  // A loop body's allocations share stacks from one iteration to the next, so most loop stacks occur exactly
  // N times (N iterations); set-up and one-off stacks occur once.
  // A stack repeated in one burst is not a loop's: moving a model's six parameters with .cuda() is one stack six
  // times in a row, before any training. Such a stack marked "iterations" at the first six events (an audit: a
  // false leak on three healthy loops recorded without annotations). A loop's stack recurs across the loop, so its
  // occurrences must span at least a quarter of the trace from the first of them on.
  struct Seen {
    uint32_t count = 0, first = 0, last = 0;
  };
  std::unordered_map<StackId, Seen> seen;
  const EventColumns& ev = s.events;
  for (uint32_t i = 0; i < lt.event_count; ++i) {
    const uint32_t r = lt.event_begin + i;
    if (ev.action[r] != Action::kAlloc || s.unlent(ev.stack[r]) == 0) continue;
    Seen& k = seen[s.unlent(ev.stack[r])];
    if (k.count++ == 0) k.first = i;
    k.last = i;
  }
  std::unordered_map<StackId, uint32_t> count;
  for (auto& [st, k] : seen)
    if (static_cast<uint64_t>(k.last - k.first) * 4 >= lt.event_count - k.first) count[st] = k.count;
  std::unordered_map<uint32_t, uint32_t> stacks_with;
  for (auto& [st, c] : count)
    if (c >= 3) ++stacks_with[c];
  uint32_t best = 0, best_n = 0;
  for (auto& [c, n] : stacks_with)
    if (n > best_n || (n == best_n && c < best)) best = c, best_n = n;
  if (best == 0) return;
  StackId marker = 0;
  for (uint32_t i = 0; i < lt.event_count && marker == 0; ++i) {
    const uint32_t r = lt.event_begin + i;
    if (ev.action[r] != Action::kAlloc || s.unlent(ev.stack[r]) == 0) continue;
    const auto c = count.find(s.unlent(ev.stack[r]));
    if (c != count.end() && c->second == best) marker = s.unlent(ev.stack[r]);
  }
  for (uint32_t i = 0; i < lt.event_count; ++i) {
    const uint32_t r = lt.event_begin + i;
    if (ev.action[r] == Action::kAlloc && s.unlent(ev.stack[r]) == marker) it->boundary.push_back(i);  // state before it
  }
  it->source = Iterations::Source::kPeriodic;
  const FrameFilter ff(s);
  it->marker = FrameFilter::format(s, ff.site(marker));
}

}  // namespace

Iterations detect_iterations(const Snapshot& s, const DeviceLifetimes& lt) {
  Iterations it;
  it.steps = lt.steps();
  if (lt.event_count == 0) return it;
  from_annotations(s, lt, &it);
  if (it.source == Iterations::Source::kNone) from_backward_calls(s, lt, &it);
  if (it.source == Iterations::Source::kNone) from_period(s, lt, &it);
  return it;
}

}  // namespace allocscope
