// StackedTimeline construction (totals, checkpoints of alive rows), state reconstruction and hit testing.
#include "allocscope/timeline.h"

#include <algorithm>
#include <cmath>

namespace allocscope {

namespace {
constexpr uint32_t kBlock = 16;  // steps per entry of block_max_[0]; each level is 16 times coarser
constexpr int kLevels = 3;
}  // namespace

TimeAxis::TimeAxis(std::span<const int64_t> t) : own_(t.begin(), t.end()) {
  for (size_t i = 1; i < own_.size(); ++i) own_[i] = std::max(own_[i], own_[i - 1]);
  time_ = own_;
}

TimeAxis TimeAxis::for_device(const Snapshot& s, const DeviceLifetimes& lt) {
  const std::span<const int64_t> t = std::span<const int64_t>(s.events.time_us).subspan(lt.event_begin, lt.event_count);
  if (!std::is_sorted(t.begin(), t.end())) return TimeAxis(t);
  TimeAxis a;
  a.time_ = t;
  return a;
}

uint32_t TimeAxis::events_before(double t_us, uint32_t from) const {
  // Galloping from `from`: a left-to-right sweep of columns costs O(log gap) per column, not O(log n).
  const uint32_t n = events();
  from = std::min(from, n);
  if (from > 0 && !(static_cast<double>(time_[from - 1]) < t_us)) return events_before(t_us);
  uint32_t lo = from, step = 1;
  while (lo + step <= n && static_cast<double>(time_[lo + step - 1]) < t_us) {
    lo += step;
    step *= 2;
  }
  auto it = std::lower_bound(time_.begin() + lo, time_.begin() + std::min<uint64_t>(n, uint64_t{lo} + step), t_us,
                             [](int64_t a, double t) { return static_cast<double>(a) < t; });
  return static_cast<uint32_t>(it - time_.begin());
}

uint32_t TimeAxis::events_before(double t_us) const {
  auto it = std::lower_bound(time_.begin(), time_.end(), t_us,
                             [](int64_t a, double t) { return static_cast<double>(a) < t; });
  return static_cast<uint32_t>(it - time_.begin());
}

void DrawResult::clear() {
  column_first_step.clear();
  column_last_step.clear();
  column_step.clear();
  column_total.clear();
  rect_x0.clear();
  rect_x1.clear();
  rect_y0.clear();
  rect_y1.clear();
  rect_row.clear();
  rect_count.clear();
  rect_marked.clear();
}

StackedTimeline::StackedTimeline(std::vector<uint32_t> birth, std::vector<uint32_t> death, std::vector<uint64_t> size,
                                 uint32_t steps, uint32_t checkpoint_interval)
    : steps_(steps), interval_(std::max<uint32_t>(1, checkpoint_interval)), birth_(std::move(birth)),
      death_(std::move(death)), own_size_(std::move(size)) {
  size_ = own_size_;
  build({});
}

StackedTimeline::StackedTimeline(std::vector<uint32_t> birth, std::vector<uint32_t> death,
                                 std::span<const uint64_t> size, std::span<const uint64_t> shared_total, uint32_t steps,
                                 uint32_t checkpoint_interval)
    : steps_(steps), interval_(std::max<uint32_t>(1, checkpoint_interval)), birth_(std::move(birth)),
      death_(std::move(death)), size_(size) {
  build(shared_total);
}

void StackedTimeline::build(std::span<const uint64_t> shared_total) {
  if (shared_total.size() == steps_) {
    total_ = shared_total;
  } else {
    // Totals: a difference array over steps (unsigned wrap-around cancels exactly), summed in place.
    own_total_.assign(static_cast<size_t>(steps_) + 1, 0);
    for (size_t r = 0; r < size_.size(); ++r) {
      const uint32_t b = std::min(birth_[r], steps_), d = std::min(death_[r], steps_);
      if (b >= d) continue;
      own_total_[b] += size_[r];
      own_total_[d] -= size_[r];
    }
    uint64_t acc = 0;
    for (uint32_t s = 0; s < steps_; ++s) own_total_[s] = acc += own_total_[s];
    own_total_.resize(steps_);
    total_ = own_total_;
  }

  group_death_.assign((size_.size() + kRowGroup - 1) / kRowGroup, 0);
  for (size_t r = 0; r < size_.size(); ++r) group_death_[r / kRowGroup] = std::max(group_death_[r / kRowGroup], death_[r]);

  // Checkpoints: each rebuilt from the previous one, so construction is one pass over births and alive lists.
  // How many rows the checkpoints hold in all (a row is in checkpoint k when birth <= k * interval < death), so
  // their one array is allocated once: grown by doubling it took up to twice its 200 MB for 10M events.
  auto rows_held = [&](uint32_t interval) {
    const uint32_t n = steps_ == 0 ? 0 : (steps_ - 1) / interval + 1;
    std::vector<int64_t> in(static_cast<size_t>(n) + 1, 0);
    for (size_t r = 0; r < size_.size(); ++r) {
      const uint64_t first = (uint64_t{birth_[r]} + interval - 1) / interval;
      const uint64_t end = std::min<uint64_t>(n, (uint64_t{std::min(death_[r], steps_)} + interval - 1) / interval);
      if (first < end) ++in[first], --in[end];
    }
    uint64_t total = 0;
    int64_t acc = 0;
    for (uint32_t k = 0; k < n; ++k) total += static_cast<uint64_t>(acc += in[k]);
    return total;
  };
  // At most 16 rows held per row (or 16M in all): rows that stay alive are held by every checkpoint, so a trace of
  // 800,000 segments never freed held 600M (an audit: 5.3 GB for `state` of a 6.4 MB file). Sparser checkpoints
  // cost each lookup at most the births between two of them.
  const uint64_t budget = std::min<uint64_t>(UINT32_MAX, std::max<uint64_t>(16 * uint64_t{size_.size()}, 1u << 24));
  uint64_t held = rows_held(interval_);
  while (held > budget && interval_ < (1u << 30)) held = rows_held(interval_ *= 2);
  std::vector<uint32_t> cur, next;
  uint32_t cur_step = 0;
  const uint32_t nckpt = steps_ == 0 ? 0 : (steps_ - 1) / interval_ + 1;
  ckpt_offset_.reserve(nckpt + 1);
  ckpt_rows_.reserve(held);
  for (uint32_t k = 0; k < nckpt; ++k) {
    const uint32_t s = k * interval_;
    if (k == 0) {
      // advance() adds rows born after its base step, so the rows born at step 0 seed the first checkpoint.
      for (uint32_t r = 0; r < first_born_after(0); ++r)
        if (death_[r] > 0) cur.push_back(r);
    } else {
      advance(cur, cur_step, s, &next);
      cur.swap(next);
    }
    cur_step = s;
    ckpt_offset_.push_back(static_cast<uint32_t>(ckpt_rows_.size()));
    ckpt_rows_.insert(ckpt_rows_.end(), cur.begin(), cur.end());
  }
  ckpt_offset_.push_back(static_cast<uint32_t>(ckpt_rows_.size()));

  // Argmax of totals per aligned block of 16, 256 and 4096 steps: a column's highest state in O(16 * levels).
  for (int L = 0; L < kLevels; ++L) {
    const uint32_t bs = kBlock << (4 * L);
    std::vector<uint32_t>& lv = block_max_[L];
    lv.resize((steps_ + bs - 1) / bs);
    for (uint32_t b = 0; b < lv.size(); ++b) {
      const uint32_t lo = b * bs, hi = std::min(steps_, lo + bs);
      uint32_t best = lo;
      if (L == 0) {
        for (uint32_t x = lo + 1; x < hi; ++x)
          if (total_[x] > total_[best]) best = x;
      } else {
        for (uint32_t x = lo; x < hi; x += bs >> 4) {
          const uint32_t m = block_max_[L - 1][x / (bs >> 4)];
          if (total_[m] > total_[best]) best = m;
        }
      }
      lv[b] = best;
    }
  }
}

StackedTimeline StackedTimeline::from_lifetimes(const DeviceLifetimes& lt, uint32_t checkpoint_interval) {
  const uint32_t n = lt.count();
  std::vector<uint32_t> birth(n), death(n);
  for (uint32_t i = 0; i < n; ++i) {
    birth[i] = lt.birth_step(i);
    death[i] = lt.death_step(i);
  }
  return StackedTimeline(std::move(birth), std::move(death), std::span<const uint64_t>(lt.size),
                         std::span<const uint64_t>(lt.total), lt.steps(), checkpoint_interval);
}

uint32_t StackedTimeline::first_born_after(uint32_t step) const {
  return static_cast<uint32_t>(std::upper_bound(birth_.begin(), birth_.end(), step) - birth_.begin());
}

// Galloping from `from`: a sweep's next answer is near its last, and a binary search over 10M births costs a column
// ~24 cache misses twice (8% of the widest draw of a 10M-event trace).
uint32_t StackedTimeline::first_born_after(uint32_t step, uint32_t from) const {
  const uint32_t n = static_cast<uint32_t>(birth_.size());
  if (from >= n || birth_[from] > step) return std::min(from, n);
  uint32_t lo = from, gap = 1;  // birth_[lo] <= step
  while (lo + gap < n && birth_[lo + gap] <= step) lo += gap, gap *= 2;
  const uint32_t hi = static_cast<uint32_t>(std::min<uint64_t>(uint64_t{lo} + gap, n));
  return static_cast<uint32_t>(std::upper_bound(birth_.begin() + lo + 1, birth_.begin() + hi, step) - birth_.begin());
}

void StackedTimeline::advance(std::span<const uint32_t> base, uint32_t base_step, uint32_t step,
                              std::vector<uint32_t>* out) const {
  out->clear();
  out->reserve(base.size() + 64);
  for (uint32_t r : base)
    if (death_[r] > step) out->push_back(r);
  const uint32_t end = first_born_after(step);
  for (uint32_t r = first_born_after(base_step); r < end; ++r)
    if (death_[r] > step) out->push_back(r);
}

void StackedTimeline::alive_at(uint32_t step, std::vector<uint32_t>* rows, std::vector<uint64_t>* offsets) const {
  rows->clear();
  if (offsets) offsets->clear();
  if (steps_ == 0) return;
  step = std::min(step, steps_ - 1);
  const uint32_t k = step / interval_;
  advance(std::span<const uint32_t>(ckpt_rows_).subspan(ckpt_offset_[k], ckpt_offset_[k + 1] - ckpt_offset_[k]),
          k * interval_, step, rows);
  if (offsets) {
    offsets->resize(rows->size());
    uint64_t acc = 0;
    for (size_t i = 0; i < rows->size(); ++i) {
      (*offsets)[i] = acc;
      acc += size_[(*rows)[i]];
    }
  }
}

uint32_t StackedTimeline::hit_test(uint32_t step, uint64_t y_bytes, uint64_t* offset) const {
  thread_local std::vector<uint32_t> rows;
  alive_at(step, &rows);
  uint64_t acc = 0;
  for (uint32_t r : rows) {
    if (y_bytes < acc + size_[r]) {
      if (size_[r] == 0) continue;  // zero-byte bands have no height to hit
      if (offset) *offset = acc;
      return r;
    }
    acc += size_[r];
  }
  return kNoRow;
}

uint32_t StackedTimeline::argmax_total(uint32_t first, uint32_t last) const {
  if (steps_ == 0) return 0;
  last = std::min(last, steps_ - 1);
  first = std::min(first, last);
  uint32_t best = first;
  auto consider = [&](uint32_t x) {
    if (total_[x] > total_[best]) best = x;
  };
  // Level -1 is single steps; level L blocks hold kBlock << 4L steps. Climb while unaligned, then descend.
  auto size_of = [](int L) { return L < 0 ? 1u : kBlock << (4 * L); };
  auto at = [&](int L, uint32_t x) { return L < 0 ? x : block_max_[L][x / size_of(L)]; };
  uint32_t x = first;
  const uint64_t end = static_cast<uint64_t>(last) + 1;
  int L = -1;
  for (; L < kLevels - 1; ++L) {
    const uint32_t up = size_of(L + 1);
    while (x % up != 0 && x + size_of(L) <= end) {
      consider(at(L, x));
      x += size_of(L);
    }
    if (x % up != 0) break;  // the range ends before the next boundary
  }
  for (; L >= -1; --L)
    while (x + size_of(L) <= end) {
      consider(at(L, x));
      x += size_of(L);
    }
  return best;
}

void StackedTimeline::column_states(const DrawRequest& req, uint32_t c, uint32_t hint, uint32_t* first,
                                    uint32_t* last) const {
  const double w = (req.x_end - req.x_begin) / std::max<uint32_t>(1, req.width_px);
  // Both edges from the column index (not x0 + w), so neighbouring columns share the exact same boundary.
  const double x0 = req.x_begin + w * c, x1 = req.x_begin + w * (c + 1.0);
  const double max_step = steps_ == 0 ? 0 : steps_ - 1;
  uint32_t a = 0, b = 0;
  if (req.axis == DrawRequest::Axis::kTime && req.time) {
    // State after k events is visible from the k-th event's time; the column sees the state before it starts
    // and every state produced by an event inside it.
    a = req.time->events_before(x0, hint);
    b = req.time->events_before(x1, a);
  } else {
    const double fa = std::floor(x0), fb = std::ceil(x1) - 1;
    a = static_cast<uint32_t>(std::clamp(fa, 0.0, max_step));
    b = static_cast<uint32_t>(std::clamp(std::max(fa, fb), 0.0, max_step));
  }
  a = std::min<uint32_t>(a, static_cast<uint32_t>(max_step));
  b = std::clamp<uint32_t>(b, a, static_cast<uint32_t>(max_step));
  *first = a;
  *last = b;
}

void StackedTimeline::column_range(const DrawRequest& req, uint32_t c, uint32_t* first, uint32_t* last,
                                   uint32_t* shown) const {
  column_states(req, c, 0, first, last);
  *shown = argmax_total(*first, *last);
}

uint32_t StackedTimeline::hit_test_px(const DrawRequest& req, uint32_t column, double y_px) const {
  if (steps_ == 0 || y_px < 0) return kNoRow;
  uint32_t a, b, s;
  column_range(req, column, &a, &b, &s);
  const double y = req.y_min_bytes + y_px * req.bytes_per_px;
  if (y < 0) return kNoRow;
  return hit_test(s, static_cast<uint64_t>(y));
}

void StackedTimeline::band_outline(uint32_t row, std::vector<uint32_t>* steps, std::vector<uint64_t>* offsets) const {
  steps->clear();
  offsets->clear();
  if (row >= rows() || birth_[row] >= death_[row] || steps_ == 0) return;
  // Only rows below it alive at its birth can move it (later rows are born above), each once, when it dies.
  thread_local std::vector<uint32_t> alive;
  thread_local std::vector<std::pair<uint32_t, uint64_t>> drops;
  alive_at(birth_[row], &alive);
  uint64_t offset = 0;
  drops.clear();
  for (uint32_t r : alive) {
    if (r >= row) break;
    offset += size_[r];
    if (death_[r] < death_[row]) drops.emplace_back(death_[r], size_[r]);
  }
  std::sort(drops.begin(), drops.end());
  steps->push_back(birth_[row]);
  offsets->push_back(offset);
  for (auto [st, sz] : drops) {
    offset -= sz;
    if (steps->back() == st) {
      offsets->back() = offset;
    } else {
      steps->push_back(st);
      offsets->push_back(offset);
    }
  }
  steps->push_back(death_[row]);
  offsets->push_back(offset);
}

size_t StackedTimeline::memory_bytes() const {
  return birth_.capacity() * 4 + death_.capacity() * 4 + own_size_.capacity() * 8 + own_total_.capacity() * 8 +
         ckpt_offset_.capacity() * 4 + ckpt_rows_.capacity() * 4 + group_death_.capacity() * 4 +
         (block_max_[0].capacity() + block_max_[1].capacity() + block_max_[2].capacity()) * 4;
}

}  // namespace allocscope
