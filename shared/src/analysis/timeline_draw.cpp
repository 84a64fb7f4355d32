// The draw query of StackedTimeline: per column, the shown state's bands as pixel runs, merged into rectangles.
#include <algorithm>

#include "allocscope/timeline.h"

namespace allocscope {

namespace {

struct Run {
  float y0, y1;
  uint32_t row, count;
  uint32_t rect;  // index of the rectangle this run extends
  bool same(const Run& o) const { return y0 == o.y0 && y1 == o.y1 && row == o.row && count == o.count; }
};

// Appends a run; one whose height vanishes in float (a sliver near the top of a tall column) joins the run below,
// so rectangles never have zero height and still account for every row.
void push_run(std::vector<Run>* runs, const Run& r, std::span<const uint64_t> size) {
  if (r.y1 > r.y0 || runs->empty()) {
    runs->push_back(r);
    return;
  }
  Run& below = runs->back();
  below.y1 = std::max(below.y1, r.y1);
  below.count += r.count;
  if (size[r.row] > size[below.row]) below.row = r.row;
}

// Turns one column's alive rows into runs: bands >= 1 px alone, thinner neighbours merged until >= 1 px.
void column_runs(std::span<const uint32_t> alive, std::span<const uint64_t> size, double ymin, double bpp,
                 double height, std::vector<Run>* runs) {
  runs->clear();
  const double inv = 1.0 / bpp;
  uint64_t acc = 0;
  bool open = false;
  Run cur{};
  uint64_t cur_big = 0;
  for (uint32_t r : alive) {
    const uint64_t lo = acc, hi = acc + size[r];
    acc = hi;
    const double flo = static_cast<double>(lo), fhi = static_cast<double>(hi);
    if (fhi <= ymin || hi == lo) continue;
    if (flo >= ymin + height * bpp) break;
    const double y0 = std::max(0.0, (flo - ymin) * inv), y1 = std::min(height, (fhi - ymin) * inv);
    if (y1 - y0 >= 1.0) {
      if (open) {
        cur.y1 = static_cast<float>(y0);
        push_run(runs, cur, size);
        open = false;
      }
      push_run(runs, {static_cast<float>(y0), static_cast<float>(y1), r, 1, 0}, size);
      continue;
    }
    if (!open) {
      cur = {static_cast<float>(y0), static_cast<float>(y1), r, 0, 0};
      cur_big = 0;
      open = true;
    }
    ++cur.count;
    if (size[r] > cur_big) cur_big = size[r], cur.row = r;
    if (y1 - cur.y0 >= 1.0) {
      cur.y1 = static_cast<float>(y1);
      push_run(runs, cur, size);
      open = false;
    } else {
      cur.y1 = static_cast<float>(y1);
    }
  }
  if (open) push_run(runs, cur, size);
}

}  // namespace

void StackedTimeline::draw(const DrawRequest& req, DrawResult* out) const {
  out->clear();
  const uint32_t W = req.width_px;
  if (W == 0 || steps_ == 0 || req.bytes_per_px <= 0 || !(req.x_end > req.x_begin)) return;
  out->column_first_step.resize(W);
  out->column_last_step.resize(W);
  out->column_step.resize(W);
  out->column_total.resize(W);

  std::vector<uint32_t> alive, scratch;
  std::vector<Run> prev, cur;
  uint32_t prev_shown = UINT32_MAX;
  for (uint32_t c = 0; c < W; ++c) {
    uint32_t a, b, s;
    column_range(req, c, &a, &b, &s);
    out->column_first_step[c] = a;
    out->column_last_step[c] = b;
    out->column_step[c] = s;
    out->column_total[c] = static_cast<double>(total_[s]);
    if (s == prev_shown) {
      // Same state as the column before (zoomed in past one step per pixel): every rectangle grows.
      for (const Run& r : prev) out->rect_x1[r.rect] = c + 1;
      continue;
    }
    // Rebuild the alive list from whichever is closer below `s`: the previous column's state or a checkpoint.
    const uint32_t k = s / interval_;
    if (prev_shown != UINT32_MAX && prev_shown <= s && prev_shown >= k * interval_) {
      advance(alive, prev_shown, s, &scratch);
    } else {
      advance(std::span<const uint32_t>(ckpt_rows_).subspan(ckpt_offset_[k], ckpt_offset_[k + 1] - ckpt_offset_[k]),
              k * interval_, s, &scratch);
    }
    alive.swap(scratch);
    prev_shown = s;

    column_runs(alive, size_, req.y_min_bytes, req.bytes_per_px, static_cast<double>(req.height_px), &cur);
    for (size_t j = 0; j < cur.size(); ++j) {
      if (j < prev.size() && cur[j].same(prev[j])) {
        cur[j].rect = prev[j].rect;
        out->rect_x1[cur[j].rect] = c + 1;
        continue;
      }
      cur[j].rect = static_cast<uint32_t>(out->rect_row.size());
      out->rect_x0.push_back(c);
      out->rect_x1.push_back(c + 1);
      out->rect_y0.push_back(cur[j].y0);
      out->rect_y1.push_back(cur[j].y1);
      out->rect_row.push_back(cur[j].row);
      out->rect_count.push_back(cur[j].count);
    }
    prev.swap(cur);
  }
}

}  // namespace allocscope
