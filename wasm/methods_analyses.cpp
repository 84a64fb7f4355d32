// The answers: summary, peak, leaks, OOMs, diff of two files and the ranks table of N files. The core computes
// them and serialises them (its to_json); the bridge caches their inputs per file and adds nothing but plumbing.
#include <algorithm>
#include <map>

#include "allocscope/diff.h"
#include "allocscope/leaks.h"
#include "allocscope/oom.h"
#include "allocscope/plan.h"
#include "allocscope/peak.h"
#include "allocscope/ranks.h"
#include "allocscope/summary.h"
#include "allocscope/whatif.h"
#include "timeline_cache.h"

namespace allocscope::wasm {

namespace {
struct DeviceAnalyses {
  Iterations iterations;
  std::unique_ptr<Categories> categories;
};
struct FileAnalyses {
  std::unique_ptr<FrameFilter> filter;
  std::map<int64_t, std::unique_ptr<DeviceAnalyses>> devices;
};
FileAnalyses& analyses_of(Loaded& f) {
  static const size_t slot = new_cache_slot();
  auto* a = cached<FileAnalyses>(f, slot);
  if (!a) a = store(f, slot, std::make_unique<FileAnalyses>());
  return *a;
}
DeviceAnalyses* device_analyses(Loaded& f, int64_t device) {
  FileAnalyses& a = analyses_of(f);
  auto it = a.devices.find(device);
  if (it != a.devices.end()) return it->second.get();
  const DeviceLifetimes* lt = lifetimes_of(f, device);
  if (!lt) return nullptr;
  auto d = std::make_unique<DeviceAnalyses>();
  d->iterations = detect_iterations(f.snapshot, *lt);
  auto c = categorize(f.snapshot, *lt, d->iterations, frame_filter_of(f));
  if (c.ok()) d->categories = std::make_unique<Categories>(std::move(c).value());
  return (a.devices[device] = std::move(d)).get();
}
json parse(const std::string& text) { return json::parse(text, nullptr, false); }
}  // namespace

const FrameFilter& frame_filter_of(Loaded& f) {
  FileAnalyses& a = analyses_of(f);
  if (!a.filter) a.filter = std::make_unique<FrameFilter>(f.snapshot);
  return *a.filter;
}
const Iterations* iterations_of(Loaded& f, int64_t device) {
  DeviceAnalyses* d = device_analyses(f, device);
  return d ? &d->iterations : nullptr;
}
const Categories* categories_of(Loaded& f, int64_t device) {
  DeviceAnalyses* d = device_analyses(f, device);
  return d ? d->categories.get() : nullptr;
}

namespace {

Answer summary(const Request& r, std::span<Loaded* const> files) {
  Loaded& f = *files[0];
  Summary s = summarize(f.snapshot, all_lifetimes(f), frame_filter_of(f), static_cast<uint32_t>(r.i64("top", 5)));
  Answer a;
  a.body = parse(to_json(f.snapshot, s));
  return a;
}

Answer peak(const Request& r, std::span<Loaded* const> files) {
  Loaded& f = *files[0];
  const int64_t device = r.i64("device");
  const DeviceLifetimes* lt = lifetimes_of(f, device);
  if (!lt) return Answer::error("no trace for that device");
  PeakOptions o;
  o.step_begin = static_cast<uint32_t>(std::max<int64_t>(0, r.i64("step_begin", 0)));
  o.step_end = static_cast<uint32_t>(std::clamp<int64_t>(r.i64("step_end", UINT32_MAX), 0, UINT32_MAX));
  o.top = static_cast<uint32_t>(std::clamp<int64_t>(r.i64("top", 20), 1, 1000));
  Peak p = find_peak(f.snapshot, *lt, segment_bands_of(f, device), frame_filter_of(f), categories_of(f, device), o);
  Answer a;
  a.body = parse(to_json(f.snapshot, *lt, p, /*with_tree=*/false));
  a.body["largest_rows"] = p.largest;  // for "show on the timeline"
  return a;
}

Answer leaks(const Request& r, std::span<Loaded* const> files) {
  Loaded& f = *files[0];
  const int64_t device = r.i64("device");
  const DeviceLifetimes* lt = lifetimes_of(f, device);
  const Iterations* it = iterations_of(f, device);
  const Categories* c = categories_of(f, device);
  if (!lt || !it || !c) return Answer::error("no trace for that device");
  LeakReport rep = find_leaks(f.snapshot, *lt, *it, *c, frame_filter_of(f));
  Answer a;
  a.body = parse(to_json(f.snapshot, rep));
  return a;
}

// "gpu": the viewer's GPU field, the same names and sizes as the CLI's --gpu (empty: none). Returns the parse error.
std::string read_gpu(const Request& r, std::optional<GpuCapacity>* out) {
  const std::string text = r.str("gpu");
  if (text.empty()) return "";
  auto g = parse_gpu_capacity(text);
  if (!g.ok()) return g.error().message;
  *out = g.value();
  return "";
}

Answer ooms(const Request& r, std::span<Loaded* const> files) {
  Loaded& f = *files[0];
  OomOptions options;
  if (const std::string bad = read_gpu(r, &options.gpu); !bad.empty()) return Answer::error(bad);
  auto reports = analyze_ooms(f.snapshot, all_lifetimes(f), options);
  Answer a;
  a.body = {{"ooms", parse(to_json(f.snapshot, all_lifetimes(f), reports))}};
  return a;
}

Answer diff(const Request& r, std::span<Loaded* const> files) {
  if (files.size() != 2) return Answer::error("diff needs two files");
  SnapshotDiff d = diff_snapshots(files[0]->snapshot, files[1]->snapshot, &all_lifetimes(*files[0]), &all_lifetimes(*files[1]));
  Answer a;
  a.body = parse(to_json(d, static_cast<uint32_t>(r.i64("top", 50))));
  return a;
}

// One row per file (its busiest device) and the outliers, by the core's rule (ranks.h), as `allocscope ranks --json`
// prints them, so the Ranks view shows the same answer for dropped snapshots and for a saved ranks file.
Answer ranks(const Request&, std::span<Loaded* const> files) {
  std::vector<RankRow> rows;
  for (Loaded* f : files) rows.push_back(rank_row(f->snapshot, summarize(f->snapshot, all_lifetimes(*f), frame_filter_of(*f), 20), f->name));
  Answer a;
  a.body = parse(to_json(compare_ranks(std::move(rows))));
  return a;
}

// Category totals alive at a step (and over the whole trace).
Answer categories(const Request& r, std::span<Loaded* const> files) {
  Loaded& f = *files[0];
  const int64_t device = r.i64("device");
  const DeviceLifetimes* lt = lifetimes_of(f, device);
  const Categories* c = categories_of(f, device);
  if (!lt || !c) return Answer::error("no trace for that device");
  const int64_t step = r.i64("step", -1);
  Answer a;
  a.body = parse(to_json(f.snapshot, *lt, *c, step < 0 ? lt->peak_step() : static_cast<uint32_t>(step)));
  return a;
}

// What-if at a batch and sequence scale (and a GPU: the same names and sizes as the CLI's --gpu), with the measured
// and predicted totals over the steps, each as the highest value in `points` equal buckets, for the chart.
Answer whatif(const Request& r, std::span<Loaded* const> files) {
  Loaded& f = *files[0];
  const int64_t device = r.i64("device");
  const DeviceLifetimes* lt = lifetimes_of(f, device);
  const Categories* c = categories_of(f, device);
  if (!lt || !c) return Answer::error("no trace for that device");
  WhatIfOptions o;
  o.batch = r.f64("batch", 1);
  o.seq = r.f64("seq", 1);
  if (!(o.batch > 0 && o.batch <= 1e6 && o.seq > 0 && o.seq <= 1e6)) return Answer::error("scales must be in (0, 1e6]");
  o.with_totals = true;
  if (const std::string bad = read_gpu(r, &o.gpu); !bad.empty()) return Answer::error(bad);
  const WhatIfReport rep = what_if(f.snapshot, *lt, *c, o);
  const size_t steps = lt->steps();
  const size_t points = static_cast<size_t>(std::clamp<int64_t>(r.i64("points", 1000), 1, 16384));
  const size_t buckets = std::min(points, steps);
  std::vector<double> measured(buckets, 0), predicted(buckets, 0);
  for (size_t s = 0; s < steps; ++s) {
    const size_t b = s * buckets / steps;
    measured[b] = std::max(measured[b], static_cast<double>(lt->total[s]));
    predicted[b] = std::max(predicted[b], static_cast<double>(rep.predicted_total[s]));
  }
  Answer a;
  a.body = parse(to_json(rep));
  a.body["steps"] = steps;
  a.add<double>("measured", "f64", measured);
  a.add<double>("predicted", "f64", predicted);
  return a;
}

// Two snapshots or more of the same loop, one size each ("sizes", in the files' order), and the run at "target"
// predicted as `allocscope whatif A B ... --sizes ... --to-batch N` predicts it (what_if_fit_runs), on "device" (the
// view's) where a file traced it, else on the file's first device with a trace.
Answer whatif_fit(const Request& r, std::span<Loaded* const> files) {
  if (files.size() < 2) return Answer::error("a fit needs two snapshots or more");
  const json* sizes = r.j.contains("sizes") ? &r.j["sizes"] : nullptr;
  if (!sizes || !sizes->is_array() || sizes->size() != files.size())
    return Answer::error("give one size per file (the batch size or sequence length each was recorded at)");
  std::vector<WhatIfRun> runs;
  for (size_t k = 0; k < files.size(); ++k) {
    const json& v = (*sizes)[k];
    if (!v.is_number() || !(v.get<double>() > 0 && v.get<double>() <= 1e9))
      return Answer::error(files[k]->name + ": its size must be a number above 0");
    const DeviceLifetimes* lt = lifetimes_of(*files[k], r.i64("device", -1));
    if (!lt || lt->event_count == 0) lt = all_lifetimes(*files[k]).first_traced();
    if (!lt) return Answer::error(files[k]->name + ": no device with a trace");
    runs.push_back({&files[k]->snapshot, lt, v.get<double>()});
  }
  const double target = r.f64("target");
  if (!(target > 0 && target <= 1e9)) return Answer::error("the size to predict must be a number above 0");
  std::optional<GpuCapacity> gpu;
  if (const std::string bad = read_gpu(r, &gpu); !bad.empty()) return Answer::error(bad);
  auto fit = what_if_fit_runs(std::move(runs), target, gpu);
  if (!fit.ok()) return Answer::error(fit.error().message);
  Answer a;
  a.body = parse(to_json(fit.value()));
  return a;
}

// What to change so the device's run fits the GPU ("gpu", the CLI's names and sizes; none: the GPU it ran out of
// memory on, else what cuts the peak most), cheapest first: `allocscope plan --json`'s document.
Answer plan_method(const Request& r, std::span<Loaded* const> files) {
  Loaded& f = *files[0];
  const int64_t device = r.i64("device");
  const DeviceLifetimes* lt = lifetimes_of(f, device);
  const Categories* c = categories_of(f, device);
  if (!lt || !c) return Answer::error("no trace for that device");
  PlanOptions o;
  if (const std::string bad = read_gpu(r, &o.gpu); !bad.empty()) return Answer::error(bad);
  o.max_options = static_cast<uint32_t>(std::clamp<int64_t>(r.i64("top", 8), 1, 32));
  Answer a;
  a.body = parse(to_json(plan(f.snapshot, *lt, *c, o)));
  return a;
}

const RegisterMethod r1({"summary", summary});
const RegisterMethod r10({"plan", plan_method});
const RegisterMethod r9({"whatif_fit", whatif_fit});
const RegisterMethod r8({"whatif", whatif});
const RegisterMethod r2({"peak", peak});
const RegisterMethod r3({"leaks", leaks});
const RegisterMethod r4({"ooms", ooms});
const RegisterMethod r5({"diff", diff});
const RegisterMethod r6({"ranks", ranks});
const RegisterMethod r7({"categories", categories});

}  // namespace
}  // namespace allocscope::wasm
