// Stacked-band timeline layout (PyTorch's Active Memory Timeline, without its "summarized" band): every allocation is
// a band; a new one goes on top; when one below is freed, those above drop. Queries answer "what to draw in this
// window at this pixel grid" and "which allocation is at (x, y)" without replaying the trace.
//
// Data structure (docs/timeline.md): rows are in stacking order and born in nondecreasing step order, so the bands
// alive at step s are {rows born <= s} filtered by death > s, already in stacking order. A checkpoint every
// `checkpoint_interval` steps stores the alive rows; any step is rebuilt from the nearest checkpoint below it by one
// filter pass plus the rows born since (O(alive + births), a few microseconds on the 1M-event fixture).
//
// Drawing: a column covers a range of states (steps); it shows the state with the highest total in that range, so
// the outline is the exact envelope of the totals. Any allocation that lives through a whole column's range is drawn
// in that column; shorter ones appear when zoomed in (at <= 1 step per column every allocation is drawn). Within a
// column, bands of at least one pixel are their own run; consecutive thinner bands merge into runs of about one pixel
// (tagged with their largest member and member count). Identical runs of adjacent columns merge into one rectangle.
// Output is flat arrays so the wasm bridge hands them to JS as typed arrays.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "allocscope/lifetimes.h"

namespace allocscope {

constexpr uint32_t kNoRow = std::numeric_limits<uint32_t>::max();

// Maps real time to steps. Event times are made nondecreasing (running maximum) so a binary search is valid even
// when threads recorded slightly out of order.
class TimeAxis {
 public:
  TimeAxis() = default;
  explicit TimeAxis(std::span<const int64_t> event_time_us);  // copies
  // Borrows the snapshot's times when they never go backwards (the usual file: 80 MB less for 10M events), so `s`
  // must outlive the axis; else keeps a corrected copy.
  static TimeAxis for_device(const Snapshot& s, const DeviceLifetimes& lt);
  TimeAxis(TimeAxis&&) noexcept = default;
  TimeAxis& operator=(TimeAxis&&) noexcept = default;
  TimeAxis(const TimeAxis&) = delete;
  TimeAxis& operator=(const TimeAxis&) = delete;
  uint32_t events() const { return static_cast<uint32_t>(time_.size()); }
  // Number of events with time < t: the state visible just before instant t.
  uint32_t events_before(double t_us) const;
  // The same, searching from `from` onwards (a hint: the answer for an earlier instant).
  uint32_t events_before(double t_us, uint32_t from) const;
  int64_t first_us() const { return time_.empty() ? 0 : time_.front(); }
  int64_t last_us() const { return time_.empty() ? 0 : time_.back(); }
  int64_t event_time_us(uint32_t e) const { return time_[e]; }

 private:
  std::vector<int64_t> own_;
  std::span<const int64_t> time_;  // own_, or the snapshot's times
};

struct DrawRequest {
  enum class Axis : uint8_t { kStep, kTime };
  Axis axis = Axis::kStep;
  // Kstep: state s occupies x in [s, s + 1). kTime: microseconds (the device's time_us); needs `time`.
  double x_begin = 0;
  double x_end = 0;
  const TimeAxis* time = nullptr;
  uint32_t width_px = 0;
  uint32_t height_px = 0;
  double y_min_bytes = 0;   // bytes at the bottom edge
  double bytes_per_px = 1;  // vertical scale
  // Optional, one byte per row: marked rows (search hits) never hide in a merged run: a run holding one is flagged
  // in `rect_marked` and shows its largest marked member.
  const uint8_t* row_mark = nullptr;
};

// Reusable output (keep one per view: vectors keep their capacity between queries).
struct DrawResult {
  // Per column (width_px entries): the states it covers [first_step, last_step] and the one it shows.
  std::vector<uint32_t> column_first_step;
  std::vector<uint32_t> column_last_step;
  std::vector<uint32_t> column_step;
  std::vector<double> column_total;  // total bytes at column_step (double: typed-array friendly, exact below 2^53)
  // Rectangles, columns [x0, x1) and pixels [y0, y1) from the bottom edge (y grows upwards; clipped to the grid).
  std::vector<uint32_t> rect_x0;
  std::vector<uint32_t> rect_x1;
  std::vector<float> rect_y0;
  std::vector<float> rect_y1;
  std::vector<uint32_t> rect_row;    // the allocation (row) shown: the largest of the merged ones
  std::vector<uint32_t> rect_count;  // how many allocations the run holds (1 unless thinner than a pixel)
  std::vector<uint8_t> rect_marked;  // 1 when the run holds a row marked by DrawRequest::row_mark
  size_t rects() const { return rect_row.size(); }
  void clear();
};

class StackedTimeline {
 public:
  StackedTimeline() = default;
  // Rows in stacking order with nondecreasing births; a row is alive in steps [birth, death); steps = n + 1.
  StackedTimeline(std::vector<uint32_t> birth, std::vector<uint32_t> death, std::vector<uint64_t> size,
                  uint32_t steps, uint32_t checkpoint_interval = 1024);
  // Borrows `lt.size` and `lt.total` (the same numbers: a 10M-event trace's copies were 100 MB in the browser), so
  // `lt` must outlive the timeline.
  static StackedTimeline from_lifetimes(const DeviceLifetimes& lt, uint32_t checkpoint_interval = 1024);
  // Moves keep what a timeline holds or borrows; copies would have to choose, so there are none.
  StackedTimeline(StackedTimeline&&) noexcept = default;
  StackedTimeline& operator=(StackedTimeline&&) noexcept = default;
  StackedTimeline(const StackedTimeline&) = delete;
  StackedTimeline& operator=(const StackedTimeline&) = delete;

  uint32_t steps() const { return steps_; }
  uint32_t rows() const { return static_cast<uint32_t>(size_.size()); }
  uint64_t total(uint32_t step) const { return total_[step]; }
  std::span<const uint64_t> totals() const { return total_; }
  uint64_t size(uint32_t row) const { return size_[row]; }
  uint32_t birth(uint32_t row) const { return birth_[row]; }
  uint32_t death(uint32_t row) const { return death_[row]; }

  // Alive rows at `step`, bottom first, and (optionally) the bytes below each.
  void alive_at(uint32_t step, std::vector<uint32_t>* rows, std::vector<uint64_t>* offsets = nullptr) const;
  // The row whose band contains byte height `y_bytes` at `step` (kNoRow above the total); *offset gets the bytes below.
  uint32_t hit_test(uint32_t step, uint64_t y_bytes, uint64_t* offset = nullptr) const;
  // The row under pixel (column, y_px) of a draw request (y_px from the bottom edge).
  uint32_t hit_test_px(const DrawRequest& req, uint32_t column, double y_px) const;
  // The states column `column` covers and the one it shows (the highest total).
  void column_range(const DrawRequest& req, uint32_t column, uint32_t* first, uint32_t* last, uint32_t* shown) const;
  // First step in [first, last] with the highest total.
  uint32_t argmax_total(uint32_t first, uint32_t last) const;

  void draw(const DrawRequest& req, DrawResult* out) const;
  // How many pieces of columns draw() sweeps apart, each on a core (0, the default: one per core for a wide draw of
  // a trace of 1M+ rows, else one). The drawing is the same either way; tests compare.
  void set_draw_pieces(size_t pieces) { draw_pieces_ = pieces; }

  // The outline of one band over its life, to highlight a selection: at steps[i] its bottom moves to offsets[i]
  // bytes (it only drops, when bands below it are freed); the last entry is its death step with the final offset.
  void band_outline(uint32_t row, std::vector<uint32_t>* steps, std::vector<uint64_t>* offsets) const;

  size_t memory_bytes() const;

 private:
  // Sizes and totals borrowed (shared_total may be empty: computed then).
  StackedTimeline(std::vector<uint32_t> birth, std::vector<uint32_t> death, std::span<const uint64_t> size,
                  std::span<const uint64_t> shared_total, uint32_t steps, uint32_t checkpoint_interval);
  void build(std::span<const uint64_t> shared_total);
  // Rebuilds the alive list at `step` from `base` (alive rows at `base_step` <= step, in order).
  void advance(std::span<const uint32_t> base, uint32_t base_step, uint32_t step, std::vector<uint32_t>* out) const;
  uint32_t first_born_after(uint32_t step) const;  // first row with birth > step
  // The same, knowing that no row before `from` is born after `step`.
  uint32_t first_born_after(uint32_t step, uint32_t from) const;
  // draw() for columns [c0, c1): the columns' entries into `columns` (sized to the whole width), the rectangles
  // they start into `rects`; `edges`, when given, gets the runs of the first and the last column, so that pieces
  // drawn apart join into what one sweep draws (timeline_draw.cpp).
  struct DrawEdges;
  void draw_columns(const DrawRequest& req, uint32_t c0, uint32_t c1, DrawResult* columns, DrawResult* rects,
                    DrawEdges* edges) const;
  // The states column c covers; `hint` is a lower bound of the answer (the previous column's first state).
  void column_states(const DrawRequest& req, uint32_t c, uint32_t hint, uint32_t* first, uint32_t* last) const;

  uint32_t steps_ = 0;
  uint32_t interval_ = 1024;
  size_t draw_pieces_ = 0;
  std::vector<uint32_t> birth_;
  std::vector<uint32_t> death_;
  std::vector<uint64_t> own_size_, own_total_;  // empty when borrowed from the lifetimes
  std::span<const uint64_t> size_;     // per row
  std::span<const uint64_t> total_;    // per step
  std::vector<uint32_t> ckpt_offset_;  // checkpoint k (step k * interval_) holds ckpt_rows_[ckpt_offset_[k] ..)
  std::vector<uint32_t> ckpt_rows_;
  static constexpr uint32_t kRowGroup = 16;
  std::vector<uint32_t> group_death_;  // per 16 rows: the latest death, to skip groups of freed temporaries
  std::vector<uint32_t> block_max_[3];  // per 16, 256, 4096 steps: the first step with the block's highest total
};

}  // namespace allocscope
