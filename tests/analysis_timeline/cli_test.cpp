// The `timeline` and `state` verbs end to end: --memoryviz equals PyTorch's golden numbers, --json is well formed.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "fixtures.h"

#ifdef ALLOCSCOPE_CLI
namespace allocscope {
namespace {

// Runs the CLI; returns stdout and sets *status to the exit code.
std::string run(const std::string& args, int* status) {
  const std::string cmd = std::string(ALLOCSCOPE_CLI) + " " + args + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 65536> buf;
  size_t n;
  while (p && (n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int st = p ? pclose(p) : -1;
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

TEST(Cli, TimelineMemoryVizEqualsPyTorch) {
  for (const std::string& name : test::small_fixtures()) {
    int status = 0;
    const std::string out = run("timeline --memoryviz " + test::fixture_path(name), &status);
    ASSERT_EQ(status, 0) << name;
    std::ifstream f(std::string(ALLOCSCOPE_FIXTURES) + "/expected/" + name + ".memoryviz.json");
    EXPECT_EQ(nlohmann::json::parse(out)["devices"], nlohmann::json::parse(f)["devices"]) << name;
  }
}

TEST(Cli, TimelineJsonAndState) {
  int status = 0;
  const auto t = nlohmann::json::parse(run("timeline --json " + test::fixture_path("linear_seed"), &status));
  ASSERT_EQ(status, 0);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0]["active"]["peak_bytes"].get<uint64_t>(), 4434803008u);
  EXPECT_EQ(t[0]["largest_at_peak"][0]["bytes"].get<uint64_t>(), 2000000000u);
  const auto s = nlohmann::json::parse(run("state --json " + test::fixture_path("oom"), &status));
  ASSERT_EQ(status, 0);
  const Snapshot* snap = test::fixture("oom");
  ASSERT_NE(snap, nullptr);
  uint64_t reserved = 0;
  for (const Segment& seg : snap->segments) reserved += seg.total_size;
  EXPECT_EQ(s["reserved_bytes"].get<uint64_t>(), reserved);
  EXPECT_EQ(s["segments"].size(), snap->segments.size());
  run("state --event 99999999 " + test::fixture_path("oom"), &status);
  EXPECT_EQ(status, 1);  // out of range: a clear error, not a crash
  run("timeline --help", &status);
  EXPECT_EQ(status, 0);
}

// An audit's finds. `timeline` named "where" an allocation came from by a rule of its own, which for C++-only stacks
// said DeviceCachingAllocator::malloc: it now names the site every other answer names (FrameFilter). A device the
// file lacks (an empty trace list, a bad or missing ordinal) is an error in `state` and `timeline` alike, with or
// without --memoryviz.
TEST(Cli, TimelineNamesTheSitesTheOtherAnswersNameAndDevicesAreChecked) {
  int status = 0;
  const std::string cpp = std::string(ALLOCSCOPE_FIXTURES) + "/gpt2_cpp.pickle.gz";
  const auto t = nlohmann::json::parse(run("timeline --json --top 50 " + cpp, &status));
  ASSERT_EQ(status, 0);
  const auto p = nlohmann::json::parse(run("peak --json --top 1000 " + cpp, &status));
  ASSERT_EQ(status, 0);
  std::set<std::string> sites;
  for (const auto& site : p["devices"][0]["sites"])
    sites.insert(site["site"].is_null() ? "<no frames>" : site["site"]["text"].get<std::string>());
  ASSERT_FALSE(t[0]["largest_at_peak"].empty());
  for (const auto& row : t[0]["largest_at_peak"]) {
    const std::string where = row["where"].get<std::string>();
    EXPECT_TRUE(sites.count(where)) << where;
    EXPECT_EQ(where.find("DeviceCachingAllocator"), std::string::npos) << where;
  }
  const std::string four = std::string(ALLOCSCOPE_FIXTURES) + "/external/pt28_4dev_expandable_oom.pickle.gz";
  for (const std::string& args : {"state --device 3 " + four, "timeline --device 3 " + four,
                                  "timeline --memoryviz --device 3 " + four, "timeline --memoryviz --device x " + four,
                                  "timeline " + four + " --device"}) {
    run(args, &status);
    EXPECT_EQ(status, 1) << args;
  }
  run("state --device 2 " + four, &status);
  EXPECT_EQ(status, 0);
}

}  // namespace
}  // namespace allocscope
#endif
