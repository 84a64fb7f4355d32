// `peak` and `summary` of a window of a file (`--from/--to`, loaded with LoadOptions::window) against the oracle of
// the whole file: the whole file loaded, and its peak searched in the same steps. The window must name the same peak
// bytes at the same file step, the same reserved peak, and the same allocations alive there.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <tuple>
#include <vector>
#include <algorithm>

#include "allocscope/answers.h"
#include "allocscope/loader.h"

namespace allocscope {
namespace {

std::string fixture(const std::string& name) { return std::string(ALLOCSCOPE_FIXTURES) + "/" + name; }

nlohmann::json peak_json(Snapshot s, const AnswerOptions& o) {
  LoadedSnapshot f("f", std::move(s));
  std::vector<LoadedSnapshot*> files{&f};
  AnswerOptions with_json = o;
  with_json.items.push_back({"json", ""});
  auto r = answer("peak", files, with_json);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().describe());
  return r.ok() ? nlohmann::json::parse(r->out) : nlohmann::json();
}

TEST(WindowAnswers, PeakOfAWindowIsThePeakOfThoseStepsOfTheWholeFile) {
  size_t compared = 0;
  int64_t recategorized = 0, windows_differing = 0, alive = 0;
  for (const char* name : {"resnet50_train.pickle", "gpt2_cpp.pickle.gz", "transformer_leak.pickle",
                           "external/pt21_select_n_4dev.pickle.gz", "external/pt25_sqattn_4dev.pickle.gz",
                           "external/pt20_opt13b.pickle.gz", "external/pt26_cs336_train.pickle.gz",
                           "capture_merged/exp_none.torch.pickle.gz", "capture_merged/nccl.torch.pickle.gz"}) {
    auto whole = load_snapshot_file(fixture(name));
    ASSERT_TRUE(whole.ok()) << name;
    uint32_t n = 0;
    for (const DeviceTrace& d : whole->devices) n = std::max(n, d.count());
    for (auto [from, to] : {std::pair<uint32_t, uint32_t>{n / 3, 2 * n / 3}, {n / 10, n / 5}, {n / 2, n}}) {
      const std::string what = std::string(name) + " " + std::to_string(from) + ".." + std::to_string(to);
      LoadOptions opt;
      opt.window = TraceWindow{TraceWindow::Unit::kStep, from, to};
      auto win = load_snapshot_file(fixture(name), opt);
      ASSERT_TRUE(win.ok()) << what;
      const nlohmann::json a = peak_json(whole.value(), AnswerOptions{{{"from", std::to_string(from)},
                                                                       {"to", std::to_string(to)}}});
      const nlohmann::json b = peak_json(std::move(win).value(), {});
      ASSERT_EQ(a["devices"].size(), b["devices"].size()) << what;
      for (size_t k = 0; k < a["devices"].size(); ++k) {
        const auto& x = a["devices"][k];
        const auto& y = b["devices"][k];
        if (!x["traced"].get<bool>()) continue;
        // A device whose trace ends before the window is answered at its end in both.
        EXPECT_EQ(x["allocated"]["bytes"], y["allocated"]["bytes"]) << what << " device " << k;
        EXPECT_EQ(x["allocated"]["step"], y["allocated"]["step"]) << what << " device " << k;
        EXPECT_EQ(x["allocated"]["time_us"], y["allocated"]["time_us"]) << what << " device " << k;
        EXPECT_EQ(x["reserved"]["bytes"], y["reserved"]["bytes"]) << what << " device " << k;
        EXPECT_EQ(x["alive"], y["alive"]) << what << " device " << k;
        EXPECT_EQ(x["window"], y["window"]) << what << " device " << k;
        EXPECT_EQ(x.value("owners", nlohmann::json()), y.value("owners", nlohmann::json())) << what << " device " << k;
        // The largest allocations alive at the peak: the same sizes and the same sites.
        ASSERT_EQ(x["largest"].size(), y["largest"].size()) << what;
        for (size_t i = 0; i < x["largest"].size(); ++i)
          EXPECT_EQ(x["largest"][i]["size"], y["largest"][i]["size"]) << what << " largest " << i;
        // And the same lives, in the file's steps: born at the same step, or before the window (at or before step
        // `from`, made by an entry before it) where the window says so; freed at the same step, or after the window.
        const auto lives = [&](const nlohmann::json& list, bool windowed) {
          std::vector<std::tuple<int64_t, int64_t, int64_t>> out;
          constexpr int64_t kBefore = -1, kAfter = -2, kAlive = -3;
          for (const auto& r : list) {
            int64_t birth = r["birth_step"].is_null() ? kBefore : r["birth_step"].get<int64_t>();
            int64_t death = r["death_step"].is_null() ? kAlive : r["death_step"].get<int64_t>();
            if (windowed) {
              if (birth == 0) birth = kBefore;  // before the trace, so before the window too
              if (r.value("born_after_window", false)) birth = kAfter;
              if (r.value("freed_after_window", false)) death = kAfter;
            } else {
              if (birth <= static_cast<int64_t>(from)) birth = kBefore;
              if (death > static_cast<int64_t>(to)) death = kAfter;
            }
            out.emplace_back(r["size"].get<int64_t>(), birth, death);
          }
          std::sort(out.begin(), out.end());
          return out;
        };
        EXPECT_EQ(lives(x["largest"], false), lives(y["largest"], true)) << what << " device " << k;
        // Categories are judged from what was loaded (iterations, what came first): a window sees less, and a few
        // allocations fall elsewhere (an input read as unknown). Counted and bounded, not hidden.
        int64_t moved = 0;
        for (auto it = x["categories"].begin(); it != x["categories"].end(); ++it)
          moved += std::abs(it.value()["count"].get<int64_t>() - y["categories"][it.key()]["count"].get<int64_t>());
        moved /= 2;
        EXPECT_LE(moved, 5) << what << " device " << k << ": " << x["categories"] << " vs " << y["categories"];
        recategorized += moved, windows_differing += moved > 0, alive += x["alive"].get<int64_t>();
        ASSERT_EQ(x["sites"].size(), y["sites"].size()) << what;
        for (size_t i = 0; i < x["sites"].size(); ++i) EXPECT_EQ(x["sites"][i]["bytes"], y["sites"][i]["bytes"]) << what;
        ++compared;
      }
    }
  }
  EXPECT_GE(compared, 26u);  // 27 today
  // Today: 8 allocations of 10,577 alive at the peaks, in 5 of the 27 device-windows (docs/loader.md).
  EXPECT_LE(recategorized, 20) << "of " << alive << " in " << windows_differing << " windows";
  EXPECT_LE(windows_differing, 8);
  std::printf("recategorized %lld of %lld alive at the peaks, in %lld of %zu device-windows\n",
              static_cast<long long>(recategorized), static_cast<long long>(alive),
              static_cast<long long>(windows_differing), compared);
}

TEST(WindowAnswers, AMergedCaptureLoadsWhole) {
  // Its trace outside PyTorch (NCCL, cuBLAS) has steps and a first time of its own: a window of it answered for
  // other moments than PyTorch's (NCCL at the peak 189 MB, whole file 407 MB). Refused, saying why.
  LoadOptions opt;
  opt.window = TraceWindow{TraceWindow::Unit::kStep, 90, 180};
  auto r = load_snapshot_file(fixture("capture_merged/nccl.pickle.gz"), opt);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().describe().find("merged capture"), std::string::npos) << r.error().describe();
}

}  // namespace
}  // namespace allocscope
