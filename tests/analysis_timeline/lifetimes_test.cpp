// Lifetimes against PyTorch's MemoryViz numbers (tests/fixtures/expected/NAME.memoryviz.json) for every fixture.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "allocscope/lifetimes.h"
#include "fixtures.h"

namespace allocscope {
namespace {

nlohmann::json golden(const std::string& name) {
  std::ifstream f(std::string(ALLOCSCOPE_FIXTURES) + "/expected/" + name + ".memoryviz.json");
  return nlohmann::json::parse(f);
}

void check_against_golden(const std::string& name) {
  const Snapshot* s = test::fixture(name);
  ASSERT_NE(s, nullptr) << name << " failed to load";
  const nlohmann::json g = golden(name);
  Lifetimes lt = build_lifetimes(*s);
  ASSERT_FALSE(g["devices"].empty());
  for (auto& [dev, want] : g["devices"].items()) {
    const DeviceLifetimes* d = lt.device(std::stoll(dev));
    ASSERT_NE(d, nullptr) << name << " device " << dev;
    const bool full = want.contains("distinct_totals");
    MemoryVizSummary m = memoryviz_summary(*d, full);
    EXPECT_EQ(m.allocations, want["allocations"].get<uint64_t>()) << name;
    EXPECT_EQ(m.peak_active_bytes, want["peak_active_bytes"].get<uint64_t>()) << name;
    EXPECT_EQ(m.final_active_bytes, want["final_active_bytes"].get<uint64_t>()) << name;
    if (full) {
      EXPECT_EQ(m.distinct_totals, want["distinct_totals"].get<std::vector<uint64_t>>()) << name;
      EXPECT_EQ(m.distinct_totals_count, m.distinct_totals.size()) << name;
    } else {
      EXPECT_EQ(m.distinct_totals_count, want["distinct_totals_count"].get<uint64_t>()) << name;
      MemoryVizSummary c = memoryviz_summary(*d, true);
      EXPECT_EQ(c.distinct_totals.size(), want["distinct_totals_count"].get<uint64_t>()) << name;
    }
  }
}

class LifetimesGolden : public ::testing::TestWithParam<std::string> {};
TEST_P(LifetimesGolden, MatchesMemoryViz) { check_against_golden(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Fixtures, LifetimesGolden,
                         ::testing::Values("linear_seed", "oom", "ddp_rank0", "ddp_rank1", "expandable_segments",
                                           "gpt2_cpp", "resnet18_grad_bug", "resnet50_train", "transformer_leak",
                                           "gpt2_big_1M"));

// Structural facts that must hold on any file: totals agree with the rows, rows are in birth order, and the
// origins are consistent with the event columns.
TEST(Lifetimes, RowsAreConsistentWithEvents) {
  for (const std::string& name : test::small_fixtures()) {
    const Snapshot* s = test::fixture(name);
    ASSERT_NE(s, nullptr) << name;
    for (const DeviceLifetimes& d : build_lifetimes(*s).devices) {
      ASSERT_EQ(d.total.size(), d.steps());
      // The peak found once at build time is the first step with the highest total, as a scan finds it.
      uint32_t scanned = 0;
      for (uint32_t t = 1; t < d.steps(); ++t)
        if (d.total[t] > d.total[scanned]) scanned = t;
      EXPECT_NE(d.known_peak_step, kNoEvent) << name;
      EXPECT_EQ(d.peak_step(), scanned) << name;
      uint32_t last_birth = 0;
      for (uint32_t i = 0; i < d.count(); ++i) {
        EXPECT_GE(d.birth_step(i), last_birth) << name << " row " << i;
        last_birth = d.birth_step(i);
        EXPECT_LT(d.birth_step(i), d.death_step(i)) << name;
        if (d.alloc_event[i] != kNoEvent) {
          EXPECT_EQ(s->events.action[d.event_begin + d.alloc_event[i]], Action::kAlloc);
          EXPECT_EQ(s->events.addr[d.event_begin + d.alloc_event[i]], d.addr[i]);
        }
        if (d.free_event[i] != kNoEvent) {
          EXPECT_EQ(s->events.action[d.event_begin + d.free_event[i]], Action::kFreeCompleted);
          EXPECT_EQ(s->events.addr[d.event_begin + d.free_event[i]], d.addr[i]);
        }
        if (d.free_requested_event[i] != kNoEvent) {
          EXPECT_EQ(s->events.action[d.event_begin + d.free_requested_event[i]], Action::kFreeRequested);
        }
        EXPECT_EQ(d.origin[i] == LifetimeOrigin::kTraced, d.alloc_event[i] != kNoEvent);
      }
    }
  }
}

}  // namespace
}  // namespace allocscope

#include "../cli/synthetic.h"

namespace allocscope {
namespace {

// An address allocated again without a free is a warning (the earlier allocation stays alive, as in PyTorch's
// viewer): the first 20 say where, the rest are counted in one line (an audit: 1.6M lines from a 1.2 MB file).
TEST(Lifetimes, AllocationsAtALiveAddressAreWarnedOfOnceEachUpToTwentyThenCounted) {
  clitest::SnapshotBuilder b;
  b.device();
  for (int k = 0; k < 100; ++k) b.event(Action::kAlloc, 0x1000, 512);
  const DeviceLifetimes lt = build_device_lifetimes(b.s, 0);
  EXPECT_EQ(lt.count(), 100u);  // every allocation is still a row
  ASSERT_EQ(lt.warnings.size(), 21u);
  EXPECT_NE(lt.warnings[0].find("event 1: address allocated again"), std::string::npos) << lt.warnings[0];
  EXPECT_EQ(lt.warnings.back(), "... and 79 more allocations at an address already allocated (99 in all)");
}

}  // namespace
}  // namespace allocscope
