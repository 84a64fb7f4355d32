// `allocscope timeline FILE`: per-device active and reserved memory over the trace (peak, final, what was alive
// before the window), and PyTorch's MemoryViz numbers with --memoryviz.
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "allocscope/frame_filter.h"
#include "allocscope/lifetimes.h"
#include "allocscope/memviz.h"
#include "allocscope/segment_timeline.h"
#include "allocscope/timeline.h"
#include "cli_common.h"
#include "verbs.h"

namespace allocscope::cli {
namespace {

nlohmann::json device_json(const Snapshot& s, const FrameFilter& ff, const DeviceLifetimes& d, size_t top) {
  const SegmentTimeline seg = build_segment_timeline(s, d.device);
  const uint32_t peak = d.peak_step();
  uint32_t seg_peak = 0;
  for (uint32_t i = 0; i < seg.steps(); ++i)
    if (seg.total[i] > seg.total[seg_peak]) seg_peak = i;
  uint64_t freed_only = 0, final_state = 0;
  for (LifetimeOrigin o : d.origin) {
    freed_only += o == LifetimeOrigin::kFreedOnly;
    final_state += o == LifetimeOrigin::kFinalState;
  }
  nlohmann::json j = {
      {"device", d.device},
      {"events", d.event_count},
      {"traced", d.event_count > 0},  // false: no trace, so "peak" is the state the snapshot holds (as `peak` says)
      {"allocations", d.count()},
      {"allocated_before_trace", {{"freed_in_trace", freed_only}, {"alive_at_end", final_state}}},
      {"active", {{"initial_bytes", d.total.front()},
                  {"peak_bytes", d.total[peak]},
                  {"peak_step", peak},
                  // null for a file without times (PyTorch before 2.1 wrote none): 0 read as a time misleads
                  {"peak_time_us", d.timed(s) ? nlohmann::json(d.step_time_us(s, peak)) : nlohmann::json()},
                  {"final_bytes", d.total.back()}}},
      {"reserved", {{"initial_bytes", seg.total.front()},
                    {"peak_bytes", seg.total[seg_peak]},
                    {"peak_step", seg_peak},
                    {"final_bytes", seg.total.back()}}},
  };
  // The largest allocations alive at the peak: what to shrink first.
  StackedTimeline tl = StackedTimeline::from_lifetimes(d);
  std::vector<uint32_t> rows;
  tl.alive_at(peak, &rows);
  std::stable_sort(rows.begin(), rows.end(), [&](uint32_t a, uint32_t b) { return d.size[a] > d.size[b]; });
  nlohmann::json at_peak = nlohmann::json::array();
  for (size_t i = 0; i < rows.size() && i < top; ++i) {
    const uint32_t r = rows[i];
    at_peak.push_back({{"row", r},
                       {"addr", d.addr[r]},
                       {"bytes", d.size[r]},
                       {"alloc_event", d.alloc_event[r] == kNoEvent ? nlohmann::json() : nlohmann::json(d.alloc_event[r])},
                       {"free_event", d.free_event[r] == kNoEvent ? nlohmann::json() : nlohmann::json(d.free_event[r])},
                       // the site every answer names (FrameFilter: the deepest user frame)
                       {"where", FrameFilter::site_text(s, ff.site(d.stack[r]))}});
  }
  j["largest_at_peak"] = at_peak;
  if (!d.warnings.empty()) j["warnings"] = d.warnings;
  if (!seg.warnings.empty()) j["segment_warnings"] = seg.warnings;
  return j;
}

void print_text(const nlohmann::json& j) {
  auto sz = [](const nlohmann::json& v) { return memviz::format_size(v.get<uint64_t>()); };
  std::printf("device %lld: %llu events, %llu allocations (%llu allocated before the trace and freed in it, %llu "
              "alive throughout)\n",
              static_cast<long long>(j["device"].get<int64_t>()),
              static_cast<unsigned long long>(j["events"].get<uint64_t>()),
              static_cast<unsigned long long>(j["allocations"].get<uint64_t>()),
              static_cast<unsigned long long>(j["allocated_before_trace"]["freed_in_trace"].get<uint64_t>()),
              static_cast<unsigned long long>(j["allocated_before_trace"]["alive_at_end"].get<uint64_t>()));
  const auto& a = j["active"];
  const auto& r = j["reserved"];
  // Step s is the state after s events: step 0 is before the first one. Said as `peak` and `summary` say it ("event
  // 4397" here was "step 4398" there: one numbering, docs/analyses.md "Words").
  auto when = [](const nlohmann::json& step) {
    const int64_t s = step.get<int64_t>();
    return s == 0 ? std::string("before the first event") : "at step " + std::to_string(s);
  };
  if (!j["traced"].get<bool>()) {
    // No trace: one state, the snapshot's, as `peak` says; "peak ... before the first event" read as a measured peak.
    std::printf("  no trace: the state the snapshot holds, not a peak: active %s, reserved %s\n",
                sz(a["final_bytes"]).c_str(), sz(r["final_bytes"]).c_str());
  } else {
    std::printf("  active:   start %s, peak %s %s, end %s\n", sz(a["initial_bytes"]).c_str(),
                sz(a["peak_bytes"]).c_str(), when(a["peak_step"]).c_str(), sz(a["final_bytes"]).c_str());
    std::printf("  reserved: start %s, peak %s %s, end %s\n", sz(r["initial_bytes"]).c_str(),
                sz(r["peak_bytes"]).c_str(), when(r["peak_step"]).c_str(), sz(r["final_bytes"]).c_str());
  }
  if (!j["largest_at_peak"].empty())
    std::printf("  %s:\n", j["traced"].get<bool>() ? "largest alive at the peak" : "largest alive");
  for (const auto& x : j["largest_at_peak"])
    std::printf("    %12s  %s\n", sz(x["bytes"]).c_str(), x["where"].get<std::string>().c_str());
  if (j.contains("warnings"))
    for (const auto& w : j["warnings"]) std::printf("  warning: %s\n", w.get<std::string>().c_str());
}

int run_timeline(const std::vector<std::string>& argv) {
  const Args args = parse_args(argv, {"device", "top"});
  for (const auto& [name, value] : args.options)
    if (name != "device" && name != "top" && name != "json" && name != "memoryviz")
      return fail("timeline: unknown option --" + name);
  if (args.positional.size() != 1) return fail("usage: allocscope timeline FILE [--device N] [--top K] [--json] [--memoryviz]");
  Snapshot s;
  if (!load_or_report(args.positional[0], &s)) return 1;
  uint32_t top = 5;
  if (args.has("top") && !parse_count(args.get("top"), &top)) return fail("timeline: --top needs a number");
  const Lifetimes lt = build_lifetimes(s);
  int64_t device = 0;
  bool device_given = false;
  if (!device_option("timeline", args, args.positional[0], lt, &device, &device_given)) return 1;
  const FrameFilter ff(s);
  if (args.has("memoryviz")) {
    // The shape of tests/fixtures/expected/NAME.memoryviz.json, so it diffs against PyTorch's own numbers.
    nlohmann::json devices = nlohmann::json::object();
    for (const DeviceLifetimes& d : lt.devices) {
      // PyTorch's viewer draws a device with segments and no events too, flat (an audit: such devices were left out,
      // and a file whose only device was one read {}).
      if (!memoryviz_offers(s, d.device) || (device_given && d.device != device)) continue;
      const MemoryVizSummary m = memoryviz_summary(d);
      devices[std::to_string(d.device)] = {{"allocations", m.allocations},
                                           {"peak_active_bytes", m.peak_active_bytes},
                                           {"final_active_bytes", m.final_active_bytes},
                                           {"distinct_totals", m.distinct_totals}};
    }
    nlohmann::json out = {{"source", "allocscope timeline --memoryviz (PyTorch MemoryViz.js process_alloc_data)"},
                          {"devices", devices}};
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  nlohmann::json out = nlohmann::json::array();
  for (const DeviceLifetimes& d : lt.devices)
    if (!device_given || d.device == device) out.push_back(device_json(s, ff, d, top));
  // An empty file says why there is nothing to show (its JSON stays the empty list of devices).
  if (out.empty() && !args.has("json")) return no_device("timeline", args.positional[0], lt, "", false);
  if (args.has("json")) {
    std::printf("%s\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    for (const auto& j : out) print_text(j);
  }
  return 0;
}

const RegisterVerb kRegister({
    "timeline",
    "active and reserved memory over the trace: peak, final, largest at the peak",
    "usage: allocscope timeline FILE [--device N] [--top K] [--json] [--memoryviz]\n\n"
    "Replays each device's trace like PyTorch's Active Memory Timeline (alloc paired with free_completed;\n"
    "blocks alive before the trace window counted from the start) and its segment timeline (with expandable\n"
    "segments' map/unmap). Prints, per device: allocation counts, active bytes at the start, peak (with its\n"
    "event index) and end, the same for reserved bytes, and the K largest allocations alive at the peak.\n\n"
    "  --device N    only device N; --device host: the file's pinned host memory (PyTorch 2.14+)\n"
    "  --top K       how many allocations at the peak to list (default 5)\n"
    "  --json        machine-readable output (one object per device)\n"
    "  --memoryviz   the numbers PyTorch's web viewer computes (allocations, peak_active_bytes,\n"
    "                final_active_bytes, distinct_totals) as JSON, for diffing against PyTorch\n",
    run_timeline,
    40,
});

}  // namespace
}  // namespace allocscope::cli
