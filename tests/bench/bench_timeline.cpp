// Timeline benchmarks on the 1M-event fixture: lifetimes build, layout build, hover, 2000-px draws at several zooms.
// ALLOCSCOPE_BENCH_FILE: another input (make_big_trace's 10M-event file: do draws cost the same at 10x the events?).
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>

#include "allocscope/allocator_state.h"
#include "allocscope/lifetimes.h"
#include "allocscope/loader.h"
#include "allocscope/segment_timeline.h"
#include "allocscope/timeline.h"

namespace allocscope {
namespace {

struct Fixture {
  Snapshot snapshot;
  DeviceLifetimes lifetimes;
  StackedTimeline timeline;
  TimeAxis time;
  SegmentTimeline segments;
  StackedTimeline segment_layout;
  AllocatorStateIndex state;
};

const Fixture& big() {
  static std::unique_ptr<Fixture> f = [] {
    const char* other = std::getenv("ALLOCSCOPE_BENCH_FILE");
    const std::string path = other ? other : std::string(ALLOCSCOPE_FIXTURES) + "/gpt2_big_1M.pickle.gz";
    auto r = load_snapshot_file(path);
    if (!r.ok()) {
      std::fprintf(stderr, "cannot load %s: %s\n", path.c_str(), r.error().describe().c_str());
      std::exit(1);
    }
    auto p = std::make_unique<Fixture>();
    p->snapshot = std::move(r).value();
    p->lifetimes = build_device_lifetimes(p->snapshot, 0);
    p->timeline = StackedTimeline::from_lifetimes(p->lifetimes);
    p->time = TimeAxis::for_device(p->snapshot, p->lifetimes);
    p->segments = build_segment_timeline(p->snapshot, 0);
    p->segment_layout = layout_segments(p->segments);
    p->state = AllocatorStateIndex(p->snapshot, p->lifetimes, p->segments);
    return p;
  }();
  return *f;
}

DrawRequest request(const Fixture& f, double zoom, double center_step) {
  DrawRequest req;
  req.width_px = 2000;
  req.height_px = 600;
  const double span = f.timeline.steps() * zoom;
  req.x_begin = std::max(0.0, center_step - span / 2);
  req.x_end = req.x_begin + span;
  req.bytes_per_px = f.timeline.total(f.lifetimes.peak_step()) / 600.0;
  return req;
}

void BM_LifetimesBuild(benchmark::State& st) {
  const Fixture& f = big();
  for (auto _ : st) benchmark::DoNotOptimize(build_device_lifetimes(f.snapshot, 0));
}
BENCHMARK(BM_LifetimesBuild)->Unit(benchmark::kMillisecond);

void BM_TimelineBuild(benchmark::State& st) {
  const Fixture& f = big();
  for (auto _ : st) benchmark::DoNotOptimize(StackedTimeline::from_lifetimes(f.lifetimes));
  st.counters["bytes"] = static_cast<double>(f.timeline.memory_bytes());
}
BENCHMARK(BM_TimelineBuild)->Unit(benchmark::kMillisecond);

// Hover: a random pixel of a full-width 2000 x 600 view.
void BM_Hover(benchmark::State& st) {
  const Fixture& f = big();
  const DrawRequest req = request(f, 1.0, f.timeline.steps() / 2.0);
  std::mt19937 rng(1);
  for (auto _ : st) {
    const uint32_t col = rng() % req.width_px;
    const double y = (rng() % 6000) / 10.0;
    benchmark::DoNotOptimize(f.timeline.hit_test_px(req, col, y));
  }
}
BENCHMARK(BM_Hover)->Unit(benchmark::kMicrosecond);

// Draw 2000 px wide; range(0) = steps in the window as a fraction 1/range(0) of the trace, centred on the peak.
void BM_Draw(benchmark::State& st) {
  const Fixture& f = big();
  const DrawRequest req = request(f, 1.0 / st.range(0), f.lifetimes.peak_step());
  DrawResult r;
  for (auto _ : st) f.timeline.draw(req, &r);
  st.counters["rects"] = static_cast<double>(r.rects());
}
BENCHMARK(BM_Draw)->Arg(1)->Arg(10)->Arg(100)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);

// Any zoom: each iteration draws a random window (1 to 1/10000 of the trace, random position), half of them zoomed
// vertically into a random 1/8 of the peak.
void BM_DrawRandomWindows(benchmark::State& st) {
  const Fixture& f = big();
  std::mt19937 rng(4);
  std::uniform_real_distribution<double> u(0, 1);
  DrawResult r;
  for (auto _ : st) {
    DrawRequest req = request(f, std::pow(10.0, -4 * u(rng)), u(rng) * f.timeline.steps());
    if (rng() % 2) {
      req.bytes_per_px /= 8;
      req.y_min_bytes = u(rng) * 7 / 8 * f.timeline.total(f.lifetimes.peak_step());
    }
    f.timeline.draw(req, &r);
  }
}
BENCHMARK(BM_DrawRandomWindows)->Unit(benchmark::kMillisecond);

void BM_DrawTimeAxis(benchmark::State& st) {
  const Fixture& f = big();
  DrawRequest req = request(f, 1.0, 0);
  req.axis = DrawRequest::Axis::kTime;
  req.time = &f.time;
  req.x_begin = static_cast<double>(f.time.first_us());
  req.x_end = static_cast<double>(f.time.last_us()) + 1;
  DrawResult r;
  for (auto _ : st) f.timeline.draw(req, &r);
  st.counters["rects"] = static_cast<double>(r.rects());
}
BENCHMARK(BM_DrawTimeAxis)->Unit(benchmark::kMillisecond);

void BM_SegmentDraw(benchmark::State& st) {
  const Fixture& f = big();
  DrawRequest req = request(f, 1.0, f.timeline.steps() / 2.0);
  uint64_t peak = 0;
  for (uint64_t t : f.segment_layout.totals()) peak = std::max(peak, t);
  req.bytes_per_px = peak / 600.0;
  DrawResult r;
  for (auto _ : st) f.segment_layout.draw(req, &r);
  st.counters["rects"] = static_cast<double>(r.rects());
}
BENCHMARK(BM_SegmentDraw)->Unit(benchmark::kMillisecond);

// Allocator state (segments, blocks, pending frees, rounding) at a random step.
void BM_AllocatorState(benchmark::State& st) {
  const Fixture& f = big();
  std::mt19937 rng(2);
  AllocatorState out;
  for (auto _ : st) {
    f.state.at(rng() % f.timeline.steps(), &out);
    benchmark::DoNotOptimize(out.block_addr.data());
  }
}
BENCHMARK(BM_AllocatorState)->Unit(benchmark::kMicrosecond);

// Highlighting a hovered allocation: its outline over its whole life.
void BM_BandOutline(benchmark::State& st) {
  const Fixture& f = big();
  std::mt19937 rng(3);
  std::vector<uint32_t> steps;
  std::vector<uint64_t> offsets;
  for (auto _ : st) {
    f.timeline.band_outline(rng() % f.timeline.rows(), &steps, &offsets);
    benchmark::DoNotOptimize(steps.data());
  }
}
BENCHMARK(BM_BandOutline)->Unit(benchmark::kMicrosecond);

void BM_SegmentTimelineBuild(benchmark::State& st) {
  const Fixture& f = big();
  for (auto _ : st) benchmark::DoNotOptimize(build_segment_timeline(f.snapshot, 0));
}
BENCHMARK(BM_SegmentTimelineBuild)->Unit(benchmark::kMillisecond);

void BM_AllocatorStateIndexBuild(benchmark::State& st) {
  const Fixture& f = big();
  for (auto _ : st) benchmark::DoNotOptimize(AllocatorStateIndex(f.snapshot, f.lifetimes, f.segments));
}
BENCHMARK(BM_AllocatorStateIndexBuild)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace allocscope

BENCHMARK_MAIN();
