// `allocscope check BASELINE NEW`, the CI gate, through the built binary. Its peaks are judged against PyTorch's own
// (MemoryViz's peak active bytes in tests/fixtures/expected), and its leak verdicts against the leaks the fixtures'
// generators planted (transformer_leak: one allocation kept per iteration at gen_snapshots.py line 74).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace {

using clitest::run_cli;
using clitest::snapshot_path;
using nlohmann::json;

uint64_t pytorch_peak(const std::string& name, const std::string& device = "0") {
  const json j = json::parse(clitest::read_text(clitest::expected_path(name, "memoryviz.json")));
  return j["devices"][device]["peak_active_bytes"].get<uint64_t>();
}

std::string percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f%%", 100 * fraction);
  return buf;
}

TEST(Check, PeakGrowthIsPyTorchsPeaksAndTheLimitDecides) {
  const std::string base = snapshot_path("resnet50_train"), now = snapshot_path("transformer_leak");
  const uint64_t b = pytorch_peak("resnet50_train"), n = pytorch_peak("transformer_leak");
  const double growth = static_cast<double>(n) / static_cast<double>(b) - 1;
  ASSERT_GT(growth, 0.2);
  const auto r = run_cli({"check", base, now, "--json"});
  ASSERT_EQ(r.exit_code, 3) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["devices"].size(), 1u);
  const json& d = j["devices"][0];
  EXPECT_EQ(d["peak_allocated"]["baseline"].get<uint64_t>(), b);
  EXPECT_EQ(d["peak_allocated"]["new"].get<uint64_t>(), n);
  EXPECT_NEAR(d["peak_allocated"]["growth"].get<double>(), growth, 1e-12);
  EXPECT_FALSE(j["pass"].get<bool>());
  // The site that grew most is the one the generator made larger: its forward's line.
  EXPECT_NE(d["sites"][0]["site"].get<std::string>().find("gen_snapshots.py:74"), std::string::npos) << d["sites"];
  EXPECT_GT(d["sites"][0]["delta_bytes"].get<int64_t>(), 0);

  // Just above the real growth passes the peak (the planted leak still fails it); just below fails it.
  const auto above = run_cli({"check", base, now, "--max-peak-growth", percent(growth + 1e-4), "--json"});
  EXPECT_FALSE(json::parse(above.out)["devices"][0]["peak_allocated"]["regressed"].get<bool>());
  const auto below = run_cli({"check", base, now, "--max-peak-growth", percent(growth - 1e-4), "--json"});
  EXPECT_TRUE(json::parse(below.out)["devices"][0]["peak_allocated"]["regressed"].get<bool>());
}

TEST(Check, ANewLeakFailsAndIsNamedAKnownOneIsListed) {
  const std::string leak = snapshot_path("transformer_leak"), clean = snapshot_path("resnet50_train");
  const auto r = run_cli({"check", clean, leak, "--max-peak-growth", "1000%"});
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_NE(r.out.find("regression: device 0: new leak at gen_snapshots.py:74:transformer_leak"), std::string::npos)
      << r.out;
  // The same leaking file against itself: nothing regressed, the leak is listed as the baseline's too.
  const auto same = run_cli({"check", leak, leak});
  EXPECT_EQ(same.exit_code, 0) << same.out;
  EXPECT_EQ(same.out.rfind("PASS: ", 0), 0u) << same.out;
  EXPECT_NE(same.out.find("leak also in the baseline: gen_snapshots.py:74:transformer_leak"), std::string::npos);
  // And the clean file against itself passes with no leak at all.
  const json j = json::parse(run_cli({"check", clean, clean, "--json"}).out);
  EXPECT_TRUE(j["pass"].get<bool>());
  EXPECT_TRUE(j["devices"][0]["new_leaks"].empty());
  EXPECT_DOUBLE_EQ(j["devices"][0]["peak_allocated"]["growth"].get<double>(), 0.0);
}

TEST(Check, TwoRanksOnTwoGpusAreComparedAndReservedIsGatedOnlyWhenAsked) {
  // rank 0 traced cuda:0 and rank 1 cuda:1: one traced device each, so they pair.
  const auto r = run_cli({"check", snapshot_path("ddp_rank0"), snapshot_path("ddp_rank1"), "--json"});
  ASSERT_NE(r.exit_code, 1) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["devices"].size(), 1u);
  EXPECT_EQ(j["devices"][0]["baseline_device"].get<int>(), 0);
  EXPECT_EQ(j["devices"][0]["device"].get<int>(), 1);
  EXPECT_EQ(j["devices"][0]["peak_allocated"]["baseline"].get<uint64_t>(), pytorch_peak("ddp_rank0", "0"));
  EXPECT_EQ(j["devices"][0]["peak_allocated"]["new"].get<uint64_t>(), pytorch_peak("ddp_rank1", "1"));
  EXPECT_FALSE(j["devices"][0]["peak_reserved"]["regressed"].get<bool>());  // not gated
  const auto gated = run_cli({"check", snapshot_path("ddp_rank0"), snapshot_path("ddp_rank1"), "--max-peak-growth",
                              "1000%", "--max-reserved-growth", "0%", "--json"});
  const json g = json::parse(gated.out);
  const bool grew = g["devices"][0]["peak_reserved"]["new"].get<uint64_t>() >
                    g["devices"][0]["peak_reserved"]["baseline"].get<uint64_t>();
  EXPECT_EQ(g["devices"][0]["peak_reserved"]["regressed"].get<bool>(), grew);
  EXPECT_EQ(gated.exit_code, grew ? 3 : 0);
}

TEST(Check, BadArgumentsAreErrors) {
  const std::string f = snapshot_path("oom");
  auto r = run_cli({"check", f});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("usage: allocscope check BASELINE NEW"), std::string::npos) << r.err;
  r = run_cli({"check", f, f, "--max-peak-growth", "five"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--max-peak-growth takes a percentage"), std::string::npos) << r.err;
  r = run_cli({"check", f, f, "--device", "9"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no device to compare"), std::string::npos) << r.err;
  r = run_cli({"check", f, f, "--bogus"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("check: unknown option --bogus"), std::string::npos) << r.err;
}

}  // namespace
