// Real fixtures cut short and corrupted: every truncation point of the smallest, evenly spaced points plus opcode
// boundaries of the others, and byte flips at many positions. Each load gives an error with a message and an
// in-range offset, or loads (a flipped byte can still be a valid pickle), and never allocates beyond a bound.
#include <algorithm>
#include <set>

#include "hostile.h"

namespace hostile {
namespace {

using allocscope::load_snapshot;

// Cuts `full` at every point of `cuts` and checks each load; a cut before STOP must be an error.
void check_truncations(const Bytes& full, const std::set<size_t>& cuts, const std::string& name) {
  const size_t stop = full.size() - 1;  // the fixtures end with STOP
  size_t errors = 0;
  for (size_t k : cuts) {
    if (k >= full.size()) continue;
    Bytes cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(k));
    Outcome o = load_metered(cut);
    const std::string what = name + " cut at " + std::to_string(k);
    expect_good_error(o, cut.size(), what);
    if (k <= stop) {
      EXPECT_FALSE(o.ok) << what << " loaded without its STOP";
    }
    if (!o.ok && !o.over_budget) {
      ++errors;
      // A truncated pickle's error is at (or before) the end, and says what was expected.
      EXPECT_NE(o.error.offset, allocscope::Error::kNoOffset) << what << ": " << o.error.describe();
      EXPECT_NE(o.error.message.find("expected"), std::string::npos) << what << ": " << o.error.describe();
    }
    // Bounded: at most a small multiple of what the whole file needs, and never near the cap.
    EXPECT_LT(o.peak_bytes, int64_t{64} << 20) << what;
    if (::testing::Test::HasFailure()) return;  // one broken cut is enough to read
  }
  EXPECT_GT(errors, 0u);
}

TEST(Truncation, EveryByteOfTheSmallestFixture) {
  Bytes full = fixture_pickle("linear_seed.pickle");
  ASSERT_FALSE(full.empty());
  std::set<size_t> cuts;
  for (size_t k = 0; k < full.size(); ++k) cuts.insert(k);
  check_truncations(full, cuts, "linear_seed");
}

TEST(Truncation, EveryOpcodeBoundaryOfOom) {
  Bytes full = fixture_pickle("oom.pickle");
  ASSERT_FALSE(full.empty());
  std::set<size_t> cuts;
  for (size_t s : opcode_starts(full)) cuts.insert(s), cuts.insert(s + 1);
  EXPECT_GT(cuts.size(), 1000u);
  check_truncations(full, cuts, "oom");
}

class TruncateFixture : public ::testing::TestWithParam<const char*> {};

// ~200 evenly spaced points, plus the opcode boundaries next to each (a cut inside an argument and one between
// opcodes exercise different checks).
TEST_P(TruncateFixture, SpacedPointsAndNearbyOpcodeBoundaries) {
  Bytes full = fixture_pickle(GetParam());
  ASSERT_FALSE(full.empty());
  std::vector<size_t> starts = opcode_starts(full);
  ASSERT_GT(starts.size(), 1000u) << "opcode walker stopped early";
  std::set<size_t> cuts = {0, 1, 2, 3, full.size() - 1};
  for (int i = 0; i < 200; ++i) {
    const size_t k = full.size() * static_cast<size_t>(i) / 200;
    cuts.insert(k);
    auto it = std::lower_bound(starts.begin(), starts.end(), k);
    if (it != starts.end()) cuts.insert(*it), cuts.insert(*it + 1);
    if (it != starts.begin()) cuts.insert(*(it - 1));
  }
  check_truncations(full, cuts, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TruncateFixture,
                         ::testing::Values("ddp_rank1.pickle", "expandable_segments.pickle", "gpt2_cpp.pickle.gz",
                                           "resnet18_grad_bug.pickle"),
                         [](const auto& info) {
                           std::string n = info.param;
                           return n.substr(0, n.find('.'));
                         });

// Deterministic positions and replacement bytes (no std::random: the same cases on every machine).
struct Lcg {
  uint64_t s;
  uint64_t next() { return (s = s * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; }
};

class FlipFixture : public ::testing::TestWithParam<std::pair<const char*, int>> {};

TEST_P(FlipFixture, FlippedBytesErrorOrLoadAndRoundTrip) {
  const auto& [name, count] = GetParam();
  Bytes full = fixture_pickle(name);
  ASSERT_FALSE(full.empty());
  Lcg rng{0x5eed ^ full.size()};
  size_t loaded = 0, failed = 0;
  const uint8_t kinds[] = {0x00, 0xff, 0x80, '.', '(', 'h', 'j', 0x95};
  for (int i = 0; i < count; ++i) {
    Bytes b = full;
    const size_t pos = rng.next() % b.size();
    const uint64_t how = rng.next() % 4;
    if (how == 0) b[pos] ^= 0xff;
    else if (how == 1) b[pos] ^= static_cast<uint8_t>(1u << (rng.next() % 8));
    else if (how == 2) b[pos] = kinds[rng.next() % sizeof kinds];
    else b[pos] = static_cast<uint8_t>(rng.next());
    const std::string what = std::string(name) + " byte " + std::to_string(pos) + " set to " + std::to_string(b[pos]);
    Outcome o = load_metered(b);
    expect_good_error(o, b.size(), what);
    EXPECT_LT(o.peak_bytes, int64_t{64} << 20) << what;
    if (o.ok) {
      ++loaded;
      // Whatever loads must survive our own writer and load again to the same shape.
      auto a = load_snapshot(b);
      ASSERT_TRUE(a.ok());
      auto again = load_snapshot(allocscope::write_snapshot(a.value()));
      ASSERT_TRUE(again.ok()) << what << ": " << again.error().describe();
      EXPECT_EQ(again->events.size_rows(), a->events.size_rows()) << what;
      EXPECT_EQ(again->segments.size(), a->segments.size()) << what;
      EXPECT_EQ(again->blocks.size(), a->blocks.size()) << what;
    } else if (!o.over_budget) {
      ++failed;
    }
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_GT(failed, 0u);
  std::printf("%s: %zu flips loaded, %zu gave errors\n", name, loaded, failed);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FlipFixture,
                         ::testing::Values(std::make_pair("linear_seed.pickle", 2000),
                                           std::make_pair("oom.pickle", 2000),
                                           std::make_pair("expandable_segments.pickle", 150),
                                           std::make_pair("ddp_rank0.pickle", 150)),
                         [](const auto& info) {
                           std::string n = info.param.first;
                           return n.substr(0, n.find('.'));
                         });

// Whole regions overwritten (a torn write, a zeroed page): zeros, 0xff, and a region copied from elsewhere.
TEST(Corruption, OverwrittenRegions) {
  Bytes full = fixture_pickle("oom.pickle");
  ASSERT_FALSE(full.empty());
  for (size_t len : {16u, 256u, 4096u}) {
    for (size_t at = 0; at + len <= full.size(); at += full.size() / 37 + 1) {
      for (int fill = 0; fill < 3; ++fill) {
        Bytes b = full;
        for (size_t i = 0; i < len; ++i)
          b[at + i] = fill == 0 ? 0 : fill == 1 ? 0xff : full[(at + i + full.size() / 2) % full.size()];
        Outcome o = load_metered(b);
        expect_good_error(o, b.size(), "oom overwritten at " + std::to_string(at) + "+" + std::to_string(len));
      }
    }
  }
}

}  // namespace
}  // namespace hostile
