// trace's O(log n) segment lookup must answer exactly what PyTorch's linear "first interval containing x" scan does.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "memviz/first_cover.h"

namespace {

struct Interval {
  uint64_t start, size;
};

// PyTorch's find_segment loop.
bool brute_force(const std::vector<Interval>& ivs, uint64_t x, uint64_t* id, uint64_t* start) {
  for (size_t i = 0; i < ivs.size(); ++i) {
    if (x >= ivs[i].start && x - ivs[i].start < ivs[i].size) {
      *id = i;
      *start = ivs[i].start;
      return true;
    }
  }
  return false;
}

TEST(FirstCover, MatchesLinearScanWithOverlaps) {
  std::mt19937_64 rng(12345);  // fixed seed: the same cases every run
  for (int round = 0; round < 50; ++round) {
    allocscope::memviz::FirstCover cover;
    std::vector<Interval> ivs;
    for (int step = 0; step < 200; ++step) {
      if (rng() % 3 == 0) {
        const Interval iv{rng() % 1000, rng() % 120};  // small space: many overlaps, repeats and zero sizes
        cover.add(iv.start, iv.size, ivs.size());
        ivs.push_back(iv);
      }
      const uint64_t x = rng() % 1100;
      uint64_t want_id = 0, want_start = 0;
      allocscope::memviz::FirstCover::Hit hit{};
      const bool want = brute_force(ivs, x, &want_id, &want_start);
      ASSERT_EQ(cover.find(x, &hit), want) << "x=" << x << " round " << round;
      if (want) {
        EXPECT_EQ(hit.id, want_id);
        EXPECT_EQ(hit.start, want_start);
      }
    }
  }
}

TEST(FirstCover, EndsBeyondTwoToThe64DoNotWrap) {
  allocscope::memviz::FirstCover cover;
  cover.add(UINT64_MAX - 10, 100, 7);
  allocscope::memviz::FirstCover::Hit hit{};
  ASSERT_TRUE(cover.find(UINT64_MAX, &hit));
  EXPECT_EQ(hit.id, 7u);
  EXPECT_FALSE(cover.find(5, &hit));
}

}  // namespace
