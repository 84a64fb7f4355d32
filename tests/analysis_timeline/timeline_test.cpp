// Stacked layout invariants on every small fixture: states equal a brute-force replay, bands tile without overlap,
// the draw query tiles each column and shows every allocation alive at the state it draws, hover finds allocations.
#include <gtest/gtest.h>

#include <algorithm>

#include "allocscope/lifetimes.h"
#include "allocscope/timeline.h"
#include "fixtures.h"

namespace allocscope {
namespace {

// Rows alive at `step` by definition, in stacking order.
std::vector<uint32_t> brute_alive(const DeviceLifetimes& d, uint32_t step) {
  std::vector<uint32_t> out;
  for (uint32_t i = 0; i < d.count(); ++i)
    if (d.alive_at(i, step)) out.push_back(i);
  return out;
}

TEST(Timeline, StatesMatchBruteForceAndTile) {
  for (const std::string& name : test::small_fixtures()) {
    const Snapshot* s = test::fixture(name);
    ASSERT_NE(s, nullptr) << name;
    for (const DeviceLifetimes& d : build_lifetimes(*s).devices) {
      // A small checkpoint interval exercises both checkpoints and the births between them.
      StackedTimeline tl = StackedTimeline::from_lifetimes(d, 64);
      ASSERT_EQ(tl.steps(), d.steps());
      // from_lifetimes borrows the lifetimes' totals; a timeline that computes its own must find the same.
      {
        std::vector<uint32_t> birth(d.count()), death(d.count());
        for (uint32_t i = 0; i < d.count(); ++i) birth[i] = d.birth_step(i), death[i] = d.death_step(i);
        const StackedTimeline own(std::move(birth), std::move(death), d.size, d.steps(), 64);
        ASSERT_TRUE(std::equal(own.totals().begin(), own.totals().end(), d.total.begin(), d.total.end())) << name;
      }
      std::vector<uint32_t> rows;
      std::vector<uint64_t> offsets;
      const uint32_t stride = std::max<uint32_t>(1, d.steps() / 400);
      for (uint32_t st = 0; st < d.steps(); st += stride) {
        ASSERT_EQ(tl.total(st), d.total[st]) << name << " step " << st;
        tl.alive_at(st, &rows, &offsets);
        ASSERT_EQ(rows, brute_alive(d, st)) << name << " step " << st;
        uint64_t acc = 0;
        for (size_t i = 0; i < rows.size(); ++i) {
          ASSERT_EQ(offsets[i], acc) << name;  // each band starts where the one below ends: no overlap, no gap
          acc += d.size[rows[i]];
        }
        ASSERT_EQ(acc, d.total[st]) << name << " step " << st;  // heights sum to the total
      }
    }
  }
}

// Checks one draw result: columns tile [0, min(total, top)) with rectangles that do not overlap, and every band
// alive at the column's state lies inside the rectangles; hover at its middle returns it.
void check_draw(const std::string& name, const DeviceLifetimes& d, const StackedTimeline& tl, const DrawRequest& req,
                const DrawResult& r) {
  ASSERT_EQ(r.column_step.size(), req.width_px);
  std::vector<std::vector<std::pair<float, float>>> spans(req.width_px);
  for (size_t k = 0; k < r.rects(); ++k) {
    ASSERT_LT(r.rect_x0[k], r.rect_x1[k]);
    ASSERT_LE(r.rect_x1[k], req.width_px);
    ASSERT_LT(r.rect_y0[k], r.rect_y1[k]);
    ASSERT_GE(r.rect_count[k], 1u);
    for (uint32_t c = r.rect_x0[k]; c < r.rect_x1[k]; ++c) spans[c].push_back({r.rect_y0[k], r.rect_y1[k]});
  }
  std::vector<uint32_t> rows;
  std::vector<uint64_t> offsets;
  for (uint32_t c = 0; c < req.width_px; ++c) {
    const uint32_t st = r.column_step[c];
    ASSERT_LE(r.column_first_step[c], st);
    ASSERT_LE(st, r.column_last_step[c]);
    for (uint32_t x = r.column_first_step[c]; x <= r.column_last_step[c]; ++x)
      ASSERT_LE(d.total[x], d.total[st]) << "column shows the highest state";
    auto& sp = spans[c];
    std::sort(sp.begin(), sp.end());
    const double top = std::min<double>(req.height_px, static_cast<double>(d.total[st]) / req.bytes_per_px);
    float at = 0;
    for (auto [y0, y1] : sp) {
      ASSERT_FLOAT_EQ(y0, at) << name << " column " << c << ": rectangles tile without gap or overlap";
      at = y1;
    }
    ASSERT_NEAR(at, top, 1e-3 * std::max(1.0, top)) << name << " column " << c;
    tl.alive_at(st, &rows, &offsets);
    for (size_t i = 0; i < rows.size(); ++i) {
      const uint64_t sz = d.size[rows[i]];
      if (sz == 0) continue;
      const double mid = (offsets[i] + sz / 2.0) / req.bytes_per_px;
      if (mid >= req.height_px) break;
      bool inside = std::any_of(sp.begin(), sp.end(), [&](auto p) { return p.first - 1e-3 <= mid && mid <= p.second + 1e-3; });
      ASSERT_TRUE(inside) << name << " column " << c << " row " << rows[i];
      ASSERT_EQ(tl.hit_test(st, offsets[i] + sz / 2), rows[i]);
    }
  }
}

TEST(Timeline, DrawTilesAndCoversAtSeveralZooms) {
  for (const std::string& name : test::small_fixtures()) {
    const Snapshot* s = test::fixture(name);
    ASSERT_NE(s, nullptr) << name;
    for (const DeviceLifetimes& d : build_lifetimes(*s).devices) {
      StackedTimeline tl = StackedTimeline::from_lifetimes(d, 128);
      const uint64_t peak = d.total[d.peak_step()];
      DrawResult r;
      for (double zoom : {1.0, 0.1, 0.01}) {
        DrawRequest req;
        req.width_px = 300;
        req.height_px = 200;
        req.bytes_per_px = std::max<double>(1, peak / 200.0);
        const double span = std::max(1.0, d.steps() * zoom);
        req.x_begin = std::max(0.0, d.peak_step() - span / 2);
        req.x_end = req.x_begin + span;
        tl.draw(req, &r);
        check_draw(name, d, tl, req, r);
      }
      // Time axis over the whole trace.
      if (d.event_count > 1) {
        TimeAxis axis = TimeAxis::for_device(*s, d);
        DrawRequest req;
        req.axis = DrawRequest::Axis::kTime;
        req.time = &axis;
        req.x_begin = static_cast<double>(axis.first_us());
        req.x_end = static_cast<double>(axis.last_us()) + 1;
        req.width_px = 250;
        req.height_px = 100;
        req.bytes_per_px = std::max<double>(1, peak / 100.0);
        tl.draw(req, &r);
        check_draw(name, d, tl, req, r);
        EXPECT_EQ(r.column_first_step.front(), 0u);
        EXPECT_EQ(r.column_last_step.back(), d.event_count);
        EXPECT_EQ(*std::max_element(r.column_total.begin(), r.column_total.end()),
                  static_cast<double>(peak));  // the envelope keeps the peak at any zoom
      }
    }
  }
}

// A draw cut into pieces of columns, each swept apart (on the cores of a native build), joins into the rectangles
// one sweep draws, in its order: every small fixture at several zooms, on both axes, with marks, in 1 to 7 pieces
// (cuts at every column too: a piece of one column).
TEST(Timeline, DrawInPiecesEqualsOneSweep) {
  auto same = [](const DrawResult& a, const DrawResult& b) {
    return a.column_first_step == b.column_first_step && a.column_last_step == b.column_last_step &&
           a.column_step == b.column_step && a.column_total == b.column_total && a.rect_x0 == b.rect_x0 &&
           a.rect_x1 == b.rect_x1 && a.rect_y0 == b.rect_y0 && a.rect_y1 == b.rect_y1 && a.rect_row == b.rect_row &&
           a.rect_count == b.rect_count && a.rect_marked == b.rect_marked;
  };
  size_t compared = 0, joined = 0;
  for (const std::string& name : test::small_fixtures()) {
    const Snapshot* s = test::fixture(name);
    ASSERT_NE(s, nullptr) << name;
    for (const DeviceLifetimes& d : build_lifetimes(*s).devices) {
      StackedTimeline tl = StackedTimeline::from_lifetimes(d, 128);
      TimeAxis axis = TimeAxis::for_device(*s, d);
      std::vector<uint8_t> mark(d.count(), 0);
      for (uint32_t i = 0; i < d.count(); i += 11) mark[i] = 1;
      const uint64_t peak = d.total[d.peak_step()];
      for (int variant = 0; variant < 5; ++variant) {
        DrawRequest req;
        req.width_px = variant == 4 ? 7 : 240;
        req.height_px = 120;
        req.bytes_per_px = std::max<double>(1, peak / (variant == 2 ? 15.0 : 120.0));  // 2: zoomed into the bottom
        const double span = std::max(1.0, d.steps() * (variant == 1 ? 0.05 : 1.0));
        req.x_begin = variant == 1 ? std::max(0.0, d.peak_step() - span / 2) : 0;
        req.x_end = req.x_begin + span;
        if (variant == 3 && d.event_count > 1) {
          req.axis = DrawRequest::Axis::kTime;
          req.time = &axis;
          req.x_begin = static_cast<double>(axis.first_us());
          req.x_end = static_cast<double>(axis.last_us()) + 1;
        }
        if (variant == 2) req.row_mark = mark.data();
        DrawResult one, cut;
        tl.set_draw_pieces(1);
        tl.draw(req, &one);
        for (size_t pieces : {2, 3, 7, 240}) {
          tl.set_draw_pieces(pieces);
          tl.draw(req, &cut);
          if (!same(one, cut)) {  // the first rectangle that differs, to say where
            auto text = [](const DrawResult& r, size_t i) {
              return i >= r.rects() ? std::string("none")
                                    : std::to_string(r.rect_x0[i]) + "-" + std::to_string(r.rect_x1[i]) + " y " +
                                          std::to_string(r.rect_y0[i]) + "-" + std::to_string(r.rect_y1[i]) +
                                          " row " + std::to_string(r.rect_row[i]);
            };
            for (size_t i = 0; i < std::max(one.rects(), cut.rects()); ++i)
              if (text(one, i) != text(cut, i)) {
                ADD_FAILURE() << "rectangle " << i << ": " << text(one, i) << " in one sweep, " << text(cut, i);
                break;
              }
          }
          ASSERT_TRUE(same(one, cut)) << name << " cuda:" << d.device << " variant " << variant << " in " << pieces
                                      << " pieces: " << one.rects() << " rectangles in one sweep, " << cut.rects();
          ++compared;
        }
        for (size_t i = 0; i < one.rects(); ++i) joined += one.rect_x1[i] - one.rect_x0[i] > 1;
      }
    }
  }
  EXPECT_GT(compared, 100u);
  EXPECT_GT(joined, 1000u);  // rectangles wider than a column: the ones the cuts must join
}

// At one step per column, every allocation of the window appears in some column.
TEST(Timeline, EveryAllocationDrawnAtOneStepPerColumn) {
  const Snapshot* s = test::fixture("resnet18_grad_bug");
  ASSERT_NE(s, nullptr);
  const DeviceLifetimes d = build_device_lifetimes(*s, 0);
  StackedTimeline tl = StackedTimeline::from_lifetimes(d);
  DrawRequest req;
  req.x_begin = 0;
  req.x_end = d.steps();
  req.width_px = d.steps();
  req.height_px = 1000;
  req.bytes_per_px = d.total[d.peak_step()] / 1000.0 + 1;
  DrawResult r;
  tl.draw(req, &r);
  std::vector<uint32_t> rows;
  std::vector<bool> seen(d.count(), false);
  for (uint32_t c = 0; c < req.width_px; ++c) {
    tl.alive_at(r.column_step[c], &rows);
    for (uint32_t row : rows) seen[row] = true;
  }
  for (uint32_t i = 0; i < d.count(); ++i) EXPECT_TRUE(seen[i] || d.size[i] == 0) << "row " << i;
}

TEST(Timeline, HoverFindsTheWeightAndItsStack) {
  const Snapshot* s = test::fixture("linear_seed");
  ASSERT_NE(s, nullptr);
  const DeviceLifetimes d = build_device_lifetimes(*s, 0);
  StackedTimeline tl = StackedTimeline::from_lifetimes(d);
  // The first alloc is nn.Linear's 2 GB weight: the bottom band from then until it is freed.
  ASSERT_EQ(d.alloc_event[0], 1u);
  const uint32_t step = d.peak_step();
  uint64_t off = 1;
  const uint32_t row = tl.hit_test(step, 1000, &off);
  ASSERT_EQ(row, 0u);
  EXPECT_EQ(off, 0u);
  EXPECT_EQ(d.size[row], 2000000000u);
  bool in_linear_init = false;
  for (FrameId f : s->stack(d.stack[row]))
    if (s->str(s->frames[f].name) == "__init__" && s->str(s->frames[f].filename).ends_with("linear.py"))
      in_linear_init = true;
  EXPECT_TRUE(in_linear_init);
  EXPECT_EQ(tl.hit_test(step, d.total[step]), kNoRow);  // just above the top
  // Pixel hover at the bottom-left of a full view hits the same band once it exists.
  DrawRequest req;
  req.x_begin = 0;
  req.x_end = d.steps();
  req.width_px = d.steps();
  req.height_px = 100;
  req.bytes_per_px = d.total[step] / 100.0;
  EXPECT_EQ(tl.hit_test_px(req, step, 0.5), 0u);
}

}  // namespace
}  // namespace allocscope

namespace allocscope {
namespace {

// The multi-level block maxima give the same first-highest step as a scan, for ranges of every alignment.
TEST(Timeline, ArgmaxMatchesScan) {
  const Snapshot* s = test::fixture("transformer_leak");
  ASSERT_NE(s, nullptr);
  const DeviceLifetimes d = build_device_lifetimes(*s, 0);
  StackedTimeline tl = StackedTimeline::from_lifetimes(d);
  uint64_t seed = 7;
  auto next = [&] { return static_cast<uint32_t>((seed = seed * 6364136223846793005ULL + 1442695040888963407ULL) >> 33); };
  for (int i = 0; i < 3000; ++i) {
    uint32_t a = next() % d.steps(), b = next() % d.steps();
    if (i % 3 == 0) b = std::min<uint32_t>(d.steps() - 1, a + next() % 40);
    if (a > b) std::swap(a, b);
    uint32_t want = a;
    for (uint32_t x = a; x <= b; ++x)
      if (d.total[x] > d.total[want]) want = x;
    ASSERT_EQ(tl.argmax_total(a, b), want) << a << ".." << b;
  }
}

}  // namespace
}  // namespace allocscope

namespace allocscope {
namespace {

// A band's outline gives its offset at every step of its life.
TEST(Timeline, BandOutlineMatchesStates) {
  const Snapshot* s = test::fixture("resnet18_grad_bug");
  ASSERT_NE(s, nullptr);
  const DeviceLifetimes d = build_device_lifetimes(*s, 0);
  StackedTimeline tl = StackedTimeline::from_lifetimes(d, 128);
  std::vector<uint32_t> steps, rows;
  std::vector<uint64_t> offsets, below;
  for (uint32_t row = 0; row < d.count(); row += 37) {
    tl.band_outline(row, &steps, &offsets);
    ASSERT_GE(steps.size(), 2u);
    ASSERT_EQ(steps.front(), d.birth_step(row));
    ASSERT_EQ(steps.back(), d.death_step(row));
    const uint32_t last = std::min(d.death_step(row), d.steps());
    for (uint32_t st = d.birth_step(row); st < last; st += 1 + (last - d.birth_step(row)) / 50) {
      tl.alive_at(st, &rows, &below);
      const size_t at = std::find(rows.begin(), rows.end(), row) - rows.begin();
      ASSERT_LT(at, rows.size());
      const size_t k = std::upper_bound(steps.begin(), steps.end(), st) - steps.begin() - 1;
      ASSERT_EQ(offsets[k], below[at]) << "row " << row << " step " << st;
    }
  }
}

// Marked rows (search hits) keep their own run even when thinner than a pixel.
TEST(Timeline, MarkedRowsAreNeverHidden) {
  const Snapshot* s = test::fixture("transformer_leak");
  ASSERT_NE(s, nullptr);
  const DeviceLifetimes d = build_device_lifetimes(*s, 0);
  StackedTimeline tl = StackedTimeline::from_lifetimes(d);
  std::vector<uint8_t> mark(d.count(), 0);
  for (uint32_t i = 0; i < d.count(); i += 7) mark[i] = d.size[i] < 65536;  // small ones merge without marks
  DrawRequest req;
  req.x_begin = 0;
  req.x_end = d.steps();
  req.width_px = 400;
  req.height_px = 300;
  req.bytes_per_px = d.total[d.peak_step()] / 300.0;
  req.row_mark = mark.data();
  DrawResult r;
  tl.draw(req, &r);
  ASSERT_EQ(r.rect_marked.size(), r.rects());
  std::vector<uint32_t> rows;
  std::vector<uint64_t> below;
  size_t checked = 0;
  for (uint32_t c = 0; c < req.width_px; ++c) {
    tl.alive_at(r.column_step[c], &rows, &below);
    for (size_t i = 0; i < rows.size(); ++i) {
      if (!mark[rows[i]] || d.size[rows[i]] == 0) continue;
      const double mid = (below[i] + d.size[rows[i]] / 2.0) / req.bytes_per_px;
      bool found = false;
      for (size_t k = 0; k < r.rects() && !found; ++k)
        found = r.rect_x0[k] <= c && c < r.rect_x1[k] && r.rect_marked[k] && r.rect_y0[k] - 1e-3 <= mid &&
                mid <= r.rect_y1[k] + 1e-3;
      ASSERT_TRUE(found) << "column " << c << " row " << rows[i];
      ++checked;
    }
  }
  EXPECT_GT(checked, 100u);
}

}  // namespace
}  // namespace allocscope

namespace allocscope {
namespace {

// The galloping search from a hint agrees with the plain binary search for every hint at or below the answer.
TEST(Timeline, TimeAxisHintedSearch) {
  const Snapshot* s = test::fixture("resnet50_train");
  ASSERT_NE(s, nullptr);
  const DeviceLifetimes d = build_device_lifetimes(*s, 0);
  const TimeAxis axis = TimeAxis::for_device(*s, d);
  const double t0 = static_cast<double>(axis.first_us()), t1 = static_cast<double>(axis.last_us());
  for (int i = 0; i <= 500; ++i) {
    const double t = t0 - 5 + (t1 - t0 + 10) * i / 500.0;
    const uint32_t want = axis.events_before(t);
    for (uint32_t hint : {0u, want / 2, want > 0 ? want - 1 : 0u, want, want + 3})
      ASSERT_EQ(axis.events_before(t, hint), want) << "t " << t << " hint " << hint;
  }
}

}  // namespace
}  // namespace allocscope

namespace allocscope {
namespace {

// Rows that stay alive are held by every checkpoint: 200,000 allocations never freed over 400,000 steps held 39M
// rows (156 MB) at the usual interval, and an audit's 6.4 MB file of 800,000 such segments took 5.3 GB in `state`.
// The checkpoints now hold at most 16 rows per row (or 16M): sparser, with the same answers.
TEST(Timeline, CheckpointsStayWithinABudgetWhenRowsNeverDie) {
  const uint32_t n = 200000, steps = 2 * n;
  std::vector<uint32_t> birth(n), death(n, UINT32_MAX);
  std::vector<uint64_t> size(n, 512);
  for (uint32_t i = 0; i < n; ++i) birth[i] = 2 * i + 1;
  const StackedTimeline tl(birth, death, size, steps, 1024);
  EXPECT_LT(tl.memory_bytes(), size_t{100} << 20);
  std::vector<uint32_t> rows;
  for (uint32_t st : {0u, 1u, 2u, 1023u, 1024u, 77777u, 262144u, steps - 1}) {
    tl.alive_at(st, &rows);
    ASSERT_EQ(rows.size(), (st + 1) / 2) << st;  // rows 0..k born at odd steps <= st
    for (size_t i = 0; i < rows.size(); ++i) ASSERT_EQ(rows[i], i) << st;
  }
}

}  // namespace
}  // namespace allocscope
