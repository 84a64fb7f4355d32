// Loading a window of a trace (LoadOptions::window, snapshot/trace_window.h). The oracle is the same file loaded
// whole: at every step of the window, the windowed model holds the same allocations with the same bytes as the whole
// one at that file step, on every real snapshot we keep (ring-buffer traces, several devices, old formats, JSON).
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "allocscope/lifetimes.h"
#include "allocscope/loader.h"
#include "allocscope/segment_timeline.h"
#include "allocscope/writer.h"
#include "fixtures.h"

namespace allocscope {
namespace {

Result<Snapshot> load_window(std::span<const uint8_t> bytes, TraceWindow w,
                             LoadOptions::Ahead ahead = LoadOptions::Ahead::kAuto) {
  LoadOptions opt;
  opt.window = w;
  opt.decode_ahead = ahead;
  return load_snapshot(bytes, opt);
}

TraceWindow steps(int64_t from, int64_t to) { return TraceWindow{TraceWindow::Unit::kStep, from, to}; }

// Checks `win` (loaded with a window) against `whole` (the same bytes loaded whole), device by device: the file
// steps each device's window covers, what it holds at each of them, and that what is kept after the window is
// bounded by what is alive, not by the file.
void expect_window_of(const Snapshot& whole, const Snapshot& win, const std::string& what) {
  ASSERT_EQ(whole.devices.size(), win.devices.size()) << what;
  ASSERT_FALSE(win.window.whole()) << what;
  const Lifetimes all = build_lifetimes(whole), part = build_lifetimes(win);
  ASSERT_EQ(all.devices.size(), part.devices.size()) << what;
  for (size_t k = 0; k < all.devices.size(); ++k) {
    const DeviceLifetimes& a = all.devices[k];
    const DeviceLifetimes& p = part.devices[k];
    ASSERT_EQ(a.device, p.device);
    if (static_cast<size_t>(a.device) >= whole.devices.size()) continue;  // segments only
    const DeviceTrace& dw = whole.devices[a.device];
    const DeviceTrace& dp = win.devices[a.device];
    const std::string where = what + " device " + std::to_string(a.device);
    EXPECT_EQ(dp.events_in_file(), dw.count()) << where;
    const uint32_t kept = dp.window_end() - dp.window_begin();  // rows of the window
    const uint32_t b = dp.before;  // the window's first step in the loaded trace
    ASSERT_LE(dp.first_step + kept, dw.count()) << where;
    // The window's steps are the file's: its rows are the whole trace's rows first_step on, verbatim.
    for (uint32_t j = 0; j < kept; ++j) {
      const uint32_t rw = dw.begin + static_cast<uint32_t>(dp.first_step) + j, rp = dp.window_begin() + j;
      ASSERT_EQ(whole.events.action[rw], win.events.action[rp]) << where << " row " << j;
      ASSERT_EQ(whole.events.addr[rw], win.events.addr[rp]) << where << " row " << j;
      ASSERT_EQ(whole.events.size[rw], win.events.size[rp]) << where << " row " << j;
      ASSERT_EQ(whole.events.time_us[rw], win.events.time_us[rp]) << where << " row " << j;
    }
    // Step b + j of the loaded trace is file step first_step + j: the same bytes alive, the same allocations
    // (counted), made at the same lines (a block alive at the window's start is known by its allocation's frames).
    EXPECT_EQ(p.step_offset(), static_cast<int64_t>(dp.first_step) - b) << where;
    for (uint32_t j = 0; j <= kept; ++j) {
      const uint64_t s = dp.first_step + j;
      ASSERT_EQ(p.total[b + j], a.total[s]) << where << " step " << s << " (window step " << j << ")";
    }
    // Reserved bytes too (segments, and expandable segments' maps and unmaps), at every step of the window.
    const SegmentTimeline sa = build_segment_timeline(whole, a.device), sp = build_segment_timeline(win, a.device);
    if (sa.total.size() == a.total.size() && sp.total.size() == p.total.size())
      for (uint32_t j = 0; j <= kept; ++j)
        ASSERT_EQ(sp.total[b + j], sa.total[dp.first_step + j]) << where << " reserved at step " << dp.first_step + j;
    for (uint32_t j : {0u, kept / 2, kept}) {
      const uint64_t s = dp.first_step + j;
      size_t alive_a = 0, alive_p = 0;
      for (uint32_t i = 0; i < a.count(); ++i) alive_a += a.alive_at(i, static_cast<uint32_t>(s)) && a.size[i] > 0;
      for (uint32_t i = 0; i < p.count(); ++i) alive_p += p.alive_at(i, b + j) && p.size[i] > 0;
      EXPECT_EQ(alive_a, alive_p) << where << " step " << s;
      std::multiset<std::pair<uint64_t, std::string>> sites_a, sites_p;
      auto site = [](const Snapshot& sn, StackId st) {
        std::string o;
        for (FrameId f : sn.stacks.get(st))
          o += std::string(sn.strings.get(sn.frames[f].filename)) + ":" + std::to_string(sn.frames[f].line) + ";";
        return o;
      };
      for (uint32_t i = 0; i < a.count(); ++i)
        if (a.alive_at(i, static_cast<uint32_t>(s)) && a.size[i] > 0) sites_a.insert({a.size[i], site(whole, a.stack[i])});
      for (uint32_t i = 0; i < p.count(); ++i)
        if (p.alive_at(i, b + j) && p.size[i] > 0) sites_p.insert({p.size[i], site(win, p.stack[i])});
      EXPECT_TRUE(sites_a == sites_p) << where << " step " << s << ": the alive allocations' frames differ";
    }
    // The end of the trace is the file's.
    EXPECT_EQ(p.total.back(), a.total.back()) << where;
    // Kept after the window: at most a release of each allocation alive at its end (a free_requested and a
    // free_completed), and each allocation alive at the trace's end, besides segments' events.
    const uint64_t end_step = dp.first_step + kept;
    size_t alive_end_window = 0, alive_end = 0;
    for (uint32_t i = 0; i < a.count(); ++i) {
      alive_end_window += a.alive_at(i, static_cast<uint32_t>(end_step));
      alive_end += a.free_event[i] == kNoEvent;
    }
    size_t segment_events = 0;
    for (uint32_t r = dw.begin + static_cast<uint32_t>(end_step); r < dw.end; ++r) {
      const Action act = whole.events.action[r];
      segment_events += act == Action::kSegmentAlloc || act == Action::kSegmentFree || act == Action::kSegmentMap ||
                        act == Action::kSegmentUnmap;
    }
    EXPECT_LE(dp.after, 2 * alive_end_window + 2 * alive_end + segment_events) << where;
    if (dp.first_step + kept == dw.count()) EXPECT_EQ(dp.after, 0u) << where << ": nothing comes after";
    // Kept from before: an allocation (and a pending free_requested) of each one alive at the start, besides
    // segments' events (an expandable segment's unmap that matches no single map is kept).
    size_t alive_start = 0, segment_events_before = 0;
    for (uint32_t i = 0; i < a.count(); ++i) alive_start += a.alive_at(i, static_cast<uint32_t>(dp.first_step));
    for (uint32_t r = dw.begin; r < dw.begin + dp.first_step; ++r) {
      const Action act = whole.events.action[r];
      segment_events_before += act == Action::kSegmentAlloc || act == Action::kSegmentMap || act == Action::kSegmentUnmap;
    }
    EXPECT_LE(dp.before, 2 * alive_start + segment_events_before) << where;
  }
}

// The snapshots to try: every external one, and ours with several devices, expandable segments and JSON.
std::vector<std::string> window_fixtures() {
  std::vector<std::string> out;
  for (const auto& [name, path] : testing::external_fixtures()) out.push_back(path);
  for (const char* f : {"oom.pickle", "resnet50_train.pickle", "expandable_segments.pickle", "ddp_rank0.pickle",
                        "gpt2_cpp.pickle.gz", "torch211_cpp_pickler.pickle.gz", "transformer_leak.pickle",
                        "json/oom.json", "json/ddp_rank0.json.gz"})
    out.push_back(f);
  return out;
}

uint32_t longest_trace(const Snapshot& s) {
  uint32_t n = 0;
  for (const DeviceTrace& d : s.devices) n = std::max(n, d.count());
  return n;
}

TEST(Window, EveryFixtureAtItsThirdsHoldsWhatTheWholeFileHolds) {
  size_t files = 0, cut = 0;
  for (const std::string& name : window_fixtures()) {
    const auto bytes = testing::raw_fixture(name);
    auto whole = load_snapshot(bytes);
    ASSERT_TRUE(whole.ok()) << name << ": " << whole.error().describe();
    const uint32_t n = longest_trace(whole.value());
    if (n < 3) continue;
    ++files;
    // The middle third, the start, the end, one step, and a window past every trace.
    // A window past every trace is refused, saying so.
    auto past = load_window(bytes, steps(n + 10, n + 20));
    ASSERT_FALSE(past.ok()) << name;
    EXPECT_NE(past.error().describe().find("no entry of any device's trace is in steps"), std::string::npos);
    for (TraceWindow w : {steps(n / 3, 2 * n / 3), steps(0, n / 4), steps(n / 2, INT64_MAX), steps(n / 2, n / 2),
                          steps(n, n + 20)}) {
      auto win = load_window(bytes, w);
      ASSERT_TRUE(win.ok()) << name << " " << describe_window(w) << ": " << win.error().describe();
      expect_window_of(whole.value(), win.value(), name + " " + describe_window(w));
      // Steps from..to are the states after from..to entries: entries from..to-1, within each trace.
      for (size_t k = 0; k < win->devices.size(); ++k) {
        const int64_t count = whole->devices[k].count();
        const DeviceTrace& d = win->devices[k];
        EXPECT_EQ(d.first_step, static_cast<uint64_t>(std::min(w.from, count))) << name << " device " << k;
        EXPECT_EQ(d.window_end() - d.window_begin(), std::min(w.to, count) - std::min(w.from, count))
            << name << " device " << k;
      }
      cut += win->events.size_rows() < whole->events.size_rows();
    }
  }
  EXPECT_GE(files, 24u);  // 25 today: the others have empty traces
  EXPECT_GE(cut, files * 3);  // windows hold fewer rows than the file
}

TEST(Window, HugeTraceKeepsAboutTheWindow) {
  // 1M events on one device: a window of 10,000 entries (steps 500000..510000, the states before and after them)
  // keeps those and what was alive, not the file.
  const auto bytes = testing::raw_fixture("gpt2_big_1M.pickle.gz");
  auto whole = load_snapshot(bytes);
  ASSERT_TRUE(whole.ok());
  auto win = load_window(bytes, steps(500000, 510000));
  ASSERT_TRUE(win.ok()) << win.error().describe();
  expect_window_of(whole.value(), win.value(), "gpt2_big_1M 500000-510000");
  const DeviceTrace& d = win->devices.at(0);
  EXPECT_EQ(d.first_step, 500000u);
  EXPECT_EQ(d.window_end() - d.window_begin(), 10000u);
  EXPECT_LT(win->events.size_rows(), 40000u);
}

TEST(Window, StreamedAndDecodedAheadLoadTheSame) {
  for (const char* name : {"gpt2_cpp.pickle.gz", "torch211_cpp_pickler.pickle.gz", "external/pt21_select_n_4dev.pickle.gz"}) {
    const auto bytes = testing::raw_fixture(name);
    auto whole = load_snapshot(bytes);
    ASSERT_TRUE(whole.ok());
    const uint32_t n = longest_trace(whole.value());
    const TraceWindow w = steps(n / 3, 2 * n / 3);
    auto never = load_window(bytes, w, LoadOptions::Ahead::kNever);
    auto always = load_window(bytes, w, LoadOptions::Ahead::kAlways);
    ASSERT_TRUE(never.ok() && always.ok()) << name;
    EXPECT_TRUE(write_snapshot(never.value()) == write_snapshot(always.value())) << name;
    for (size_t chunk : {size_t{7}, size_t{4093}}) {
      LoadOptions opt;
      opt.window = w;
      SnapshotStream s(opt, bytes.size());
      for (size_t at = 0; at < bytes.size(); at += chunk)
        ASSERT_TRUE(s.feed({bytes.data() + at, std::min(chunk, bytes.size() - at)}).ok()) << name;
      EXPECT_TRUE(s.events_so_far().action.empty()) << "rows come and go in a window: none are offered early";
      auto r = s.finish();
      ASSERT_TRUE(r.ok()) << name << ": " << r.error().describe();
      testing::expect_same_model(never.value(), r.value());
      for (size_t k = 0; k < r->devices.size(); ++k) {
        EXPECT_EQ(r->devices[k].first_step, never->devices[k].first_step) << name;
        EXPECT_EQ(r->devices[k].after, never->devices[k].after) << name;
      }
    }
  }
}

TEST(Window, TimeWindowKeepsTheEntriesOfThoseTimes) {
  size_t tried = 0;
  for (const char* name : {"gpt2_cpp.pickle.gz", "resnet50_train.pickle", "external/pt21_select_n_4dev.pickle.gz",
                           "external/pt25_sqattn_4dev.pickle.gz"}) {
    const auto bytes = testing::raw_fixture(name);
    auto whole = load_snapshot(bytes);
    ASSERT_TRUE(whole.ok());
    const DeviceTrace& d0 = whole->devices.at(0);
    if (d0.count() < 10 || whole->events.time_us[d0.begin] == 0) continue;
    ++tried;
    const int64_t t0 = whole->events.time_us[d0.begin];
    const int64_t span = whole->events.time_us[d0.end - 1] - t0;
    auto w = parse_trace_window(std::to_string(span / 3) + "us", std::to_string(2 * span / 3) + "us");
    ASSERT_TRUE(w.ok()) << w.error().describe();
    auto win = load_window(bytes, w.value());
    ASSERT_TRUE(win.ok()) << name;
    expect_window_of(whole.value(), win.value(), name);
    for (size_t k = 0; k < whole->devices.size(); ++k) {
      const DeviceTrace& dw = whole->devices[k];
      const DeviceTrace& dp = win->devices[k];
      if (dw.count() == 0) continue;
      const int64_t first = whole->events.time_us[dw.begin];
      // Every step inside the window by its time is kept, and only those.
      for (uint32_t s = 0; s < dw.count(); ++s) {
        const int64_t t = whole->events.time_us[dw.begin + s] - first;
        const bool in = s >= dp.first_step && s < dp.first_step + (dp.window_end() - dp.window_begin());
        // Times in a trace ascend except for a stream's late entries: the window begins at the first entry at or
        // past `from` and ends before the first one past `to` after it.
        if (in) EXPECT_LE(t, w->to) << name << " step " << s;
        if (s < dp.first_step) EXPECT_LT(t, w->from) << name << " step " << s;
      }
    }
  }
  EXPECT_GE(tried, 3u);
}

TEST(Window, ParsedFromWhatTheUserTypes) {
  auto w = parse_trace_window("4000", "6000");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->unit, TraceWindow::Unit::kStep);
  EXPECT_EQ(w->from, 4000);
  EXPECT_EQ(w->to, 6000);
  EXPECT_EQ(describe_window(w.value()), "steps 4000-6000");
  auto t = parse_trace_window("1.5s", "2500ms");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->unit, TraceWindow::Unit::kTimeUs);
  EXPECT_EQ(t->from, 1500000);
  EXPECT_EQ(t->to, 2500000);
  auto open = parse_trace_window("300us", "");
  ASSERT_TRUE(open.ok());
  EXPECT_EQ(open->from, 300);
  EXPECT_EQ(open->to, INT64_MAX);
  EXPECT_TRUE(parse_trace_window("", "").value().whole());
  // Mistakes name the text and what is wrong.
  for (auto [from, to, says] : std::vector<std::tuple<const char*, const char*, const char*>>{
           {"10", "5", "after"}, {"1s", "500", "both be steps or both be times"}, {"abc", "", "abc"}, {"-3", "", "-3"},
           {"5h", "", "5h"}, {"", "99999999999999999999999", "99999999999999999999999"}, {"1e3", "", "1e3"}}) {
    auto bad = parse_trace_window(from, to);
    ASSERT_FALSE(bad.ok()) << from << " " << to;
    EXPECT_NE(bad.error().describe().find(says), std::string::npos) << bad.error().describe();
  }
}

TEST(Window, ATimeWindowOfATraceWithoutTimesSaysSo) {
  // PyTorch 2.0 and 2.1 write time_us 0 on every entry: a time window cannot be placed, and the load says why.
  const auto bytes = testing::raw_fixture("external/pt21_ftcourse.pickle.gz");
  auto whole = load_snapshot(bytes);
  ASSERT_TRUE(whole.ok());
  ASSERT_EQ(whole->events.time_us[whole->devices.at(0).begin], 0);
  auto none = load_window(bytes, parse_trace_window("1ms", "2ms").value());
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().describe().find("record no times"), std::string::npos) << none.error().describe();
  // From 0 the window holds every entry (all at time 0), and the load warns that times cannot place it.
  auto win = load_window(bytes, parse_trace_window("0ms", "2ms").value());
  ASSERT_TRUE(win.ok());
  bool said = false;
  for (const std::string& w : win->warnings) said |= w.find("time") != std::string::npos;
  EXPECT_TRUE(said);
}

}  // namespace
}  // namespace allocscope
