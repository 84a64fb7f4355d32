// Loading a window of a huge trace (trace_window.h).
#include "snapshot/trace_window.h"

#include <algorithm>

namespace allocscope::detail {

namespace {
// Moves `rows` (the live ones) to the end of `e`, before its last row when `before_last`.
void append_live(EventColumns& e, const EventColumns& rows, const std::vector<uint8_t>& live, bool before_last) {
  EventColumns last;
  if (before_last) {
    last.append_row(e, e.size_rows() - 1);
    e.truncate(e.size_rows() - 1);
  }
  for (size_t r = 0; r < rows.size_rows(); ++r)
    if (live[r]) e.append_row(rows, r);
  if (before_last) e.append_row(last, 0);
}
}  // namespace

const WindowFilter::ListRows* WindowFilter::list(uint64_t first_ordinal) const {
  auto it = std::lower_bound(lists_.begin(), lists_.end(), first_ordinal,
                             [](const ListRows& l, uint64_t o) { return l.first_ordinal < o; });
  return it != lists_.end() && it->first_ordinal == first_ordinal ? &*it : nullptr;
}

void WindowFilter::settle(EventColumns& e) {
  pending_ = false;
  size_t row = e.size_rows() - 1;  // moves when rows held from before the window go in front of it
  const uint64_t step = pending_ordinal_ - cur_.first_ordinal;
  cur_.entries = step + 1;
  int64_t key = static_cast<int64_t>(std::min<uint64_t>(step, INT64_MAX));
  if (step == 0) cur_.first_time_us = e.time_us[row];
  if (w_.unit == TraceWindow::Unit::kTimeUs) {
    if (step == 0) first_time_ = e.time_us[row];
    cur_.any_time |= e.time_us[row] != 0;
    // Saturated: a hostile time must not wrap around into the window.
    const __int128 d = static_cast<__int128>(e.time_us[row]) - first_time_;
    key = d > INT64_MAX ? INT64_MAX : d < INT64_MIN ? INT64_MIN : static_cast<int64_t>(d);
  }
  if (phase_ == Phase::kBefore && key >= w_.from) {
    // The allocations alive at the window's start go first, with their own frames (a free's frames are where it
    // was freed, in PyTorch's default recording: a block known only from its free would be named for the wrong line).
    const size_t kept = held_.size_rows() - dead_;
    append_live(e, held_, live_, true);
    cur_.before = static_cast<uint32_t>(kept);
    clear_held();
    row = e.size_rows() - 1;
    phase_ = Phase::kIn;
    cur_.first_step = step;
  }
  // Steps are states (step s: after s entries), so steps from..to are made by entries from..to-1; times are the
  // entries' own, both ends included.
  if (phase_ == Phase::kIn && (w_.unit == TraceWindow::Unit::kStep ? key >= w_.to : key > w_.to)) phase_ = Phase::kAfter;
  if (phase_ == Phase::kIn) return;  // kept where it is
  hold(e, row, phase_ == Phase::kAfter);
  e.truncate(row);
}

void WindowFilter::clear_held() {
  held_ = EventColumns{};
  live_.clear();
  dead_ = 0;
  alloc_.clear(), requested_.clear(), segment_.clear(), mapped_.clear();
}

void WindowFilter::hold(const EventColumns& e, size_t row, bool after) {
  const uint64_t addr = e.addr[row];
  const uint32_t at = static_cast<uint32_t>(held_.size_rows());
  auto keep = [&] {
    held_.append_row(e, row);
    live_.push_back(1);
  };
  // The release of something not held: before the window, of something dead by its start (dropped); after it, of
  // something alive at its end (kept).
  auto keep_release = [&] {
    if (after) keep();
  };
  auto drop = [&](std::unordered_map<uint64_t, uint32_t>& m) -> bool {  // the release of a held-back allocation
    auto it = m.find(addr);
    if (it == m.end()) return false;
    live_[it->second] = 0, ++dead_;
    m.erase(it);
    return true;
  };
  switch (e.action[row]) {
    case Action::kAlloc:
      alloc_[addr] = at;  // an address allocated again without a free keeps both (the older is not released here)
      keep();
      break;
    case Action::kFreeRequested:
      if (alloc_.count(addr)) {
        requested_[addr] = at;
        keep();
      } else {
        keep_release();
      }
      break;
    case Action::kFreeCompleted:
      if (drop(alloc_)) {
        drop(requested_);
        break;
      }
      keep_release();
      break;
    case Action::kSegmentAlloc:
      segment_[addr] = at;
      keep();
      break;
    case Action::kSegmentFree:
      if (!drop(segment_)) keep_release();
      break;
    case Action::kSegmentMap:
      mapped_[{addr, e.size[row]}] = at;
      keep();
      break;
    case Action::kSegmentUnmap: {
      auto it = mapped_.find({addr, e.size[row]});
      if (it == mapped_.end()) {
        // Expandable segments unmap other ranges than they mapped (a 40 MB map released as two 20 MB unmaps): an
        // unmap that matches no held map is kept on both sides of the window, or a map held from before it would
        // count memory already given back (pt28_4dev_expandable_oom: 88.2 GB reserved where the file had 84.2 GB).
        keep();
        break;
      }
      live_[it->second] = 0, ++dead_;
      mapped_.erase(it);
      break;
    }
    default: break;  // an OOM, a snapshot mark, an annotation: of no block's life, and outside the window
  }
  if (dead_ > (size_t{1} << 16) && dead_ * 2 > live_.size()) compact();
}

void WindowFilter::compact() {
  std::vector<uint32_t> moved(live_.size(), UINT32_MAX);
  EventColumns kept;
  for (size_t r = 0; r < held_.size_rows(); ++r)
    if (live_[r]) moved[r] = static_cast<uint32_t>(kept.size_rows()), kept.append_row(held_, r);
  auto remap = [&](auto& m) {
    for (auto& kv : m) kv.second = moved[kv.second];
  };
  remap(alloc_), remap(requested_), remap(segment_), remap(mapped_);
  held_ = std::move(kept);
  live_.assign(held_.size_rows(), 1);
  dead_ = 0;
}

void WindowFilter::close_list(EventColumns& e) {
  // The pending row, if any, is the next list's first entry: what was held goes before it. A list that ended
  // before the window held the allocations alive at its end: the window is its last step, after them.
  const bool before_last = pending_;
  const size_t kept = held_.size_rows() - dead_;
  append_live(e, held_, live_, before_last);
  if (phase_ == Phase::kBefore) cur_.first_step = cur_.entries, cur_.before = static_cast<uint32_t>(kept);
  if (phase_ == Phase::kAfter) cur_.after = static_cast<uint32_t>(kept);
  cur_.end = static_cast<uint32_t>(e.size_rows() - (before_last ? 1 : 0));
  if (cur_.entries) lists_.push_back(cur_);
  clear_held();
  phase_ = Phase::kBefore;
  cur_ = ListRows{};
}

void WindowFilter::list_began(EventColumns& e, uint64_t first_ordinal) {
  if (!pending_ || first_ordinal != pending_ordinal_) {
    unusual_ = true;
    return;
  }
  close_list(e);
  cur_.first_ordinal = first_ordinal;
  cur_.begin = static_cast<uint32_t>(e.size_rows() - 1);
}

void WindowFilter::end(EventColumns& e) {
  if (pending_) settle(e);
  close_list(e);
}

}  // namespace allocscope::detail
