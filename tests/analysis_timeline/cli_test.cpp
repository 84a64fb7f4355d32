// The `timeline` and `state` verbs end to end: --memoryviz equals PyTorch's golden numbers, --json is well formed.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
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

}  // namespace
}  // namespace allocscope
#endif
