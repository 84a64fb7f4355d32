// The draw query of StackedTimeline: per column, the shown state's bands as pixel runs, merged into rectangles.
//
// Columns are swept left to right. The alive list is kept as packed entries (row, death, size) with prefix minima
// of deaths and prefix sums of sizes, so moving to the next column only rewrites the list from its first entry that
// died (found by binary search on the prefix minima); runs below that point are reused as they are. The bottom of a
// training job's stack (weights, optimizer state) is stable, so most columns only redo the top.
#include <algorithm>
#include <cstdint>

#include "allocscope/timeline.h"
#include "util/parallel.h"

namespace allocscope {

namespace {

struct Entry {
  uint32_t row;
  uint32_t death;
  uint64_t size;
};

struct Run {
  float y0, y1;
  uint32_t row, count;
  uint8_t marked;  // holds a marked row; `row` is then the largest marked one
  uint32_t rect;   // index of the rectangle this run extends
  uint32_t first;  // first entry of the alive list in this run
  uint32_t last;   // last entry of the alive list in this run
  bool same(const Run& o) const {
    return y0 == o.y0 && y1 == o.y1 && row == o.row && count == o.count && marked == o.marked;
  }
};

// Picks a run's representative: its largest marked member if any, else its largest member.
void choose_row(Run* run, const std::vector<Entry>& alive, const uint8_t* mark) {
  uint64_t best = 0;
  bool best_marked = false;
  for (uint32_t i = run->first; i <= run->last; ++i) {
    const bool m = mark && mark[alive[i].row];
    if ((m && !best_marked) || (m == best_marked && alive[i].size > best)) {
      best = alive[i].size;
      best_marked = m;
      run->row = alive[i].row;
    }
  }
  run->marked = best_marked;
}

// Appends a run; one whose height vanishes in float (a sliver near the top of a tall column) joins the run below,
// so rectangles never have zero height and still account for every row.
void push_run(std::vector<Run>* runs, Run r, const std::vector<Entry>& alive, const uint8_t* mark) {
  if (r.y1 > r.y0 || runs->empty()) {
    runs->push_back(r);
    return;
  }
  Run& below = runs->back();
  below.y1 = std::max(below.y1, r.y1);
  below.count += r.count;
  below.last = r.last;
  choose_row(&below, alive, mark);
}

// Appends the runs of alive entries [from, end): bands >= 1 px alone, thinner neighbours merged until >= 1 px.
// A marked row never merges: it closes the open run and gets its own (possibly sub-pixel) run.
void column_runs(const std::vector<Entry>& alive, const std::vector<uint64_t>& below, size_t from, double ymin,
                 double bpp, double height, const uint8_t* mark, std::vector<Run>* runs) {
  const double inv = 1.0 / bpp;
  const double ymax = ymin + height * bpp;
  bool open = false;
  Run cur{};
  uint64_t cur_big = 0;
  for (size_t i = from; i < alive.size(); ++i) {
    const Entry& en = alive[i];
    if (en.size == 0) continue;
    const double flo = static_cast<double>(below[i]), fhi = static_cast<double>(below[i] + en.size);
    if (fhi <= ymin) continue;
    if (flo >= ymax) break;
    const double y0 = std::max(0.0, (flo - ymin) * inv), y1 = std::min(height, (fhi - ymin) * inv);
    const uint32_t idx = static_cast<uint32_t>(i);
    if (y1 - y0 >= 1.0 || (mark && mark[en.row])) {
      if (open) {
        cur.y1 = static_cast<float>(y0);
        push_run(runs, cur, alive, mark);
        open = false;
      }
      const uint8_t marked = mark && mark[en.row];
      push_run(runs, {static_cast<float>(y0), static_cast<float>(y1), en.row, 1, marked, 0, idx, idx}, alive, mark);
      continue;
    }
    // Merged runs never hold marked rows, so their representative is simply the largest member.
    if (!open) {
      cur = {static_cast<float>(y0), static_cast<float>(y1), en.row, 0, 0, 0, idx, idx};
      cur_big = 0;
      open = true;
    }
    ++cur.count;
    cur.last = idx;
    if (en.size > cur_big) cur_big = en.size, cur.row = en.row;
    cur.y1 = static_cast<float>(y1);
    if (y1 - cur.y0 >= 1.0) {
      push_run(runs, cur, alive, mark);
      open = false;
    }
  }
  if (open) push_run(runs, cur, alive, mark);
}

}  // namespace

struct StackedTimeline::DrawEdges {
  std::vector<Run> first, last;  // the runs of a piece's first column, and its open runs after its last
};

// Natively, a wide draw of a long trace is cut into one piece of columns per core, each swept on its own from the
// nearest checkpoint, and the pieces are joined: at each cut, a run of the piece on the right that is the same run,
// at the same position, as one still open on the left continues that rectangle, as one sweep would have continued
// it (one sweep compares each column's runs with the previous column's at the same position). So the rectangles are
// the ones a single sweep draws, in its order, whatever the number of pieces (tests check it): a 100M-event trace is
// drawn by `allocscope view` for a page, and there the draw is the answer's wait.
void StackedTimeline::draw(const DrawRequest& req, DrawResult* out) const {
  out->clear();
  const uint32_t W = req.width_px;
  if (W == 0 || steps_ == 0 || req.bytes_per_px <= 0 || !(req.x_end > req.x_begin)) return;
  out->column_first_step.resize(W);
  out->column_last_step.resize(W);
  out->column_step.resize(W);
  out->column_total.resize(W);
  const size_t pieces = std::min<size_t>(W, draw_pieces_ ? draw_pieces_
                                          : rows() >= (1u << 20) && W >= 256 ? detail::threads_for(std::min<size_t>(W / 128, 8))
                                                                             : 1);
  if (pieces <= 1) {
    draw_columns(req, 0, W, out, out, nullptr);
    return;
  }
  std::vector<uint32_t> cut(pieces + 1);
  for (size_t k = 0; k <= pieces; ++k) cut[k] = static_cast<uint32_t>(uint64_t{W} * k / pieces);
  std::vector<DrawResult> rects(pieces);
  std::vector<DrawEdges> edges(pieces);
  detail::parallel_for(pieces, [&](size_t k) { draw_columns(req, cut[k], cut[k + 1], out, &rects[k], &edges[k]); });
  // Right to left, so that a rectangle that goes on through several pieces takes its end from the last of them.
  std::vector<std::vector<uint8_t>> joined(pieces);  // per piece: its rectangles that continue one on their left
  for (size_t k = 0; k < pieces; ++k) joined[k].assign(rects[k].rects(), 0);
  for (size_t k = pieces - 1; k-- > 0;) {
    const std::vector<Run>& left = edges[k].last;
    const std::vector<Run>& right = edges[k + 1].first;
    for (size_t j = 0; j < left.size(); ++j) {
      if (j < right.size() && left[j].same(right[j])) {
        rects[k].rect_x1[left[j].rect] = rects[k + 1].rect_x1[right[j].rect];
        joined[k + 1][right[j].rect] = 1;
      } else {
        rects[k].rect_x1[left[j].rect] = cut[k + 1];  // ended at the cut, as one sweep would have ended it there
      }
    }
  }
  for (size_t k = 0; k < pieces; ++k) {
    const DrawResult& r = rects[k];
    for (size_t i = 0; i < r.rects(); ++i) {
      if (joined[k][i]) continue;
      out->rect_x0.push_back(r.rect_x0[i]);
      out->rect_x1.push_back(r.rect_x1[i]);
      out->rect_y0.push_back(r.rect_y0[i]);
      out->rect_y1.push_back(r.rect_y1[i]);
      out->rect_row.push_back(r.rect_row[i]);
      out->rect_count.push_back(r.rect_count[i]);
      out->rect_marked.push_back(r.rect_marked[i]);
    }
  }
}

void StackedTimeline::draw_columns(const DrawRequest& req, uint32_t c0, uint32_t c1, DrawResult* columns,
                                   DrawResult* rects, DrawEdges* edges) const {
  DrawResult* out = columns;
  const uint32_t W = req.width_px;
  std::vector<Entry> alive;
  std::vector<uint32_t> pmin;    // pmin[i] = min death of alive[0..i]: nonincreasing
  std::vector<uint64_t> below;   // below[i] = bytes of alive[0..i)
  std::vector<Run> prev, tail;  // the open runs (one per rectangle still growing); the part being redone
  uint32_t prev_shown = UINT32_MAX;
  uint32_t born_end = 0;  // first_born_after(prev_shown)
  for (uint32_t c = c0; c < c1; ++c) {
    uint32_t a, b;
    column_states(req, c, c == c0 ? 0 : out->column_first_step[c - 1], &a, &b);
    const uint32_t s = argmax_total(a, b);
    out->column_first_step[c] = a;
    out->column_last_step[c] = b;
    out->column_step[c] = s;
    out->column_total[c] = static_cast<double>(total_[s]);
    if (s == prev_shown) continue;  // same state as the column before: its open rectangles simply go on
    const uint32_t k = s / interval_;
    size_t changed;  // alive[0, changed) is as it was for the previous column
    uint32_t born_after;
    // Incremental from the previous column unless the gap is far larger than a checkpoint interval: births are
    // scanned in row order with dead groups skipped, which beats rereading a checkpoint's scattered rows.
    if (prev_shown != UINT32_MAX && prev_shown < s &&
        (prev_shown >= k * interval_ || s - prev_shown <= 16 * interval_)) {
      // First entry that died by step s: pmin is nonincreasing, so binary search.
      changed = static_cast<size_t>(std::partition_point(pmin.begin(), pmin.end(), [&](uint32_t d) { return d > s; }) -
                                    pmin.begin());
      size_t j = changed;
      for (size_t i = changed; i < alive.size(); ++i)
        if (alive[i].death > s) alive[j++] = alive[i];
      alive.resize(j);
      born_after = prev_shown;
    } else {
      // From the checkpoint; entries equal to the previous column's keep their prefix data and runs.
      const size_t old_size = alive.size();
      size_t j = 0;
      changed = SIZE_MAX;
      for (uint32_t i = ckpt_offset_[k]; i < ckpt_offset_[k + 1]; ++i) {
        const uint32_t r = ckpt_rows_[i];
        if (death_[r] <= s) continue;
        if (changed == SIZE_MAX && (j >= old_size || alive[j].row != r)) changed = j;
        if (j < alive.size()) {
          alive[j] = {r, death_[r], size_[r]};
        } else {
          alive.push_back({r, death_[r], size_[r]});
        }
        ++j;
      }
      if (changed == SIZE_MAX) changed = j;
      alive.resize(j);
      born_after = k * interval_;
    }
    // Rows born since: most are temporaries already freed, skipped 16 at a time through their latest death.
    const uint32_t start = born_after == prev_shown ? born_end : first_born_after(born_after);
    const uint32_t end = first_born_after(s, start);
    born_end = end;
    for (uint32_t r = start; r < end;) {
      if (r % kRowGroup == 0 && r + kRowGroup <= end && group_death_[r / kRowGroup] <= s) {
        r += kRowGroup;
        continue;
      }
      if (death_[r] > s) alive.push_back({r, death_[r], size_[r]});
      ++r;
    }
    pmin.resize(alive.size());
    below.resize(alive.size());
    size_t i0 = changed;
    if (i0 == 0 && !alive.empty()) {
      pmin[0] = alive[0].death;
      below[0] = 0;
      i0 = 1;
    }
    for (size_t i = i0; i < alive.size(); ++i) {
      pmin[i] = std::min(pmin[i - 1], alive[i].death);
      below[i] = below[i - 1] + alive[i - 1].size;
    }
    prev_shown = s;

    // Runs that end (with the entry that closed them) below the change are kept as they are; their rectangles stay
    // open. The others are rebuilt and compared with the previous column's at the same position.
    size_t keep = 0;
    while (keep < prev.size() && static_cast<size_t>(prev[keep].last) + 1 < changed) ++keep;
    tail.assign(prev.begin() + keep, prev.end());
    prev.resize(keep);
    const size_t from = keep == 0 ? 0 : prev.back().last + 1;
    const Run guard = keep == 0 ? Run{} : prev.back();
    column_runs(alive, below, from, req.y_min_bytes, req.bytes_per_px, static_cast<double>(req.height_px), req.row_mark,
                &prev);
    // A sliver on top of the kept runs joins the last of them (push_run): that run has changed, so its rectangle
    // ends here and it is compared like the rebuilt ones (kept as it was, it went on with the old one's height).
    if (keep > 0 && !prev[keep - 1].same(guard)) {
      tail.insert(tail.begin(), guard);
      --keep;
    }
    for (size_t j = keep; j < prev.size(); ++j) {
      const size_t t = j - keep;
      if (t < tail.size() && prev[j].same(tail[t])) {
        prev[j].rect = tail[t].rect;
        tail[t].rect = UINT32_MAX;  // continues
        continue;
      }
      prev[j].rect = static_cast<uint32_t>(rects->rect_row.size());
      rects->rect_x0.push_back(c);
      rects->rect_x1.push_back(W);  // until closed
      rects->rect_y0.push_back(prev[j].y0);
      rects->rect_y1.push_back(prev[j].y1);
      rects->rect_row.push_back(prev[j].row);
      rects->rect_count.push_back(prev[j].count);
      rects->rect_marked.push_back(prev[j].marked);
    }
    for (const Run& r : tail)
      if (r.rect != UINT32_MAX) rects->rect_x1[r.rect] = c;  // ended at the previous column
    if (edges && c == c0) edges->first = prev;
  }
  if (edges) edges->last = prev;
}

}  // namespace allocscope
