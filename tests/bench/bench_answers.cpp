// Answer benchmarks on the 1M-event fixture: each summary analysis after load (frame filter, iterations,
// categories, leaks, peak with tree, OOM scan, consistency checks, whole summary, diff, JSON). ALLOCSCOPE_BENCH_FILE
// names another input; ALLOCSCOPE_THREADS=1 runs the per-device work on one thread (util/parallel.h).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "allocscope/categories.h"
#include "allocscope/diff.h"
#include "allocscope/iterations.h"
#include "allocscope/leaks.h"
#include "allocscope/lifetimes.h"
#include "allocscope/loader.h"
#include "allocscope/oom.h"
#include "allocscope/peak.h"
#include "allocscope/segment_timeline.h"
#include "allocscope/summary.h"

namespace allocscope {
namespace {

struct Fixture {
  Snapshot s;
  Lifetimes lifetimes;
  FrameFilter ff;
  SegmentTimeline segments;
  Iterations it;
  Categories c;
};

const Fixture& big() {
  static std::unique_ptr<Fixture> f = [] {
    // ALLOCSCOPE_BENCH_FILE: another input (e.g. make_big_trace's multi-device files, for the per-device threads).
    const char* other = std::getenv("ALLOCSCOPE_BENCH_FILE");
    const std::string path = other && *other ? other : std::string(ALLOCSCOPE_FIXTURES) + "/gpt2_big_1M.pickle.gz";
    auto r = load_snapshot_file(path);
    if (!r.ok()) {
      std::fprintf(stderr, "cannot load %s: %s\n", path.c_str(), r.error().describe().c_str());
      std::exit(1);
    }
    auto p = std::make_unique<Fixture>();
    p->s = std::move(r).value();
    p->lifetimes = build_lifetimes(p->s);
    p->ff = FrameFilter(p->s);
    p->segments = build_segment_timeline(p->s, 0);
    p->it = detect_iterations(p->s, p->lifetimes.devices[0]);
    p->c = categorize(p->s, p->lifetimes.devices[0], p->it, p->ff).value();
    return p;
  }();
  return *f;
}

const DeviceLifetimes& dev(const Fixture& f) { return f.lifetimes.devices[0]; }

void BM_Lifetimes(benchmark::State& st) {
  const Fixture& f = big();
  for (auto _ : st) benchmark::DoNotOptimize(build_lifetimes(f.s));
}
void BM_FrameFilter(benchmark::State& st) {
  const Fixture& f = big();
  for (auto _ : st) benchmark::DoNotOptimize(FrameFilter(f.s));
}
void BM_SegmentTimeline(benchmark::State& st) {
  const Fixture& f = big();
  for (auto _ : st) benchmark::DoNotOptimize(build_segment_timeline(f.s, 0));
}
void BM_Iterations(benchmark::State& st) {
  const Fixture& f = big();
  for (auto _ : st) benchmark::DoNotOptimize(detect_iterations(f.s, dev(f)));
}
void BM_Categories(benchmark::State& st) {
  const Fixture& f = big();
  for (auto _ : st) benchmark::DoNotOptimize(categorize(f.s, dev(f), f.it, f.ff));
}
void BM_Leaks(benchmark::State& st) {
  const Fixture& f = big();
  for (auto _ : st) benchmark::DoNotOptimize(find_leaks(f.s, dev(f), f.it, f.c, f.ff));
}
void BM_Peak(benchmark::State& st) {
  const Fixture& f = big();
  for (auto _ : st) benchmark::DoNotOptimize(find_peak(f.s, dev(f), &f.segments, f.ff, &f.c));
}
void BM_PeakWindow(benchmark::State& st) {
  const Fixture& f = big();
  PeakOptions o;
  o.step_begin = 400000;
  o.step_end = 500000;
  for (auto _ : st) benchmark::DoNotOptimize(find_peak(f.s, dev(f), &f.segments, f.ff, &f.c, o));
}
void BM_Ooms(benchmark::State& st) {
  const Fixture& f = big();
  for (auto _ : st) benchmark::DoNotOptimize(analyze_ooms(f.s, f.lifetimes));
}
void BM_ConsistencyChecks(benchmark::State& st) {
  const Fixture& f = big();
  for (auto _ : st) benchmark::DoNotOptimize(consistency_warnings(f.s, f.lifetimes));
}
void BM_Summary(benchmark::State& st) {  // everything `allocscope summary` runs after load and lifetimes
  const Fixture& f = big();
  for (auto _ : st) benchmark::DoNotOptimize(summarize(f.s, f.lifetimes, f.ff));
}
void BM_DiffSelf(benchmark::State& st) {
  const Fixture& f = big();
  for (auto _ : st) benchmark::DoNotOptimize(diff_snapshots(f.s, f.s));
}
void BM_PeakJsonWithTree(benchmark::State& st) {
  const Fixture& f = big();
  const Peak p = find_peak(f.s, dev(f), &f.segments, f.ff, &f.c);
  for (auto _ : st) benchmark::DoNotOptimize(to_json(f.s, dev(f), p, true));
}

BENCHMARK(BM_Lifetimes)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FrameFilter)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SegmentTimeline)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Iterations)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Categories)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Leaks)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Peak)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PeakWindow)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Ooms)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ConsistencyChecks)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Summary)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DiffSelf)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PeakJsonWithTree)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace allocscope

BENCHMARK_MAIN();
