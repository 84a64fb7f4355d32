// Trace entries decoded ahead on a second thread (Reader::decode_ahead, pickle/predecoder.h) change nothing the
// loader answers: every kept snapshot, and inputs mangled where the thread guesses entries (bytes 0x7D, EMPTY_DICT,
// planted anywhere), load to the same model or fail with the same error, with the thread or without. The mangled
// inputs also run under ThreadSanitizer (label "threads").
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "allocscope/loader.h"
#include "allocscope/writer.h"
#include "fixtures.h"

namespace allocscope {
namespace {

struct Loaded {
  Result<Snapshot> snap;
  uint64_t ahead = 0;
};

Loaded load(std::span<const uint8_t> bytes, LoadOptions::Ahead ahead) {
  LoadOptions opt;
  opt.decode_ahead = ahead;
  LoadOptions::PickleFacts facts;
  opt.facts = &facts;
  Loaded l{load_snapshot(bytes, opt)};
  l.ahead = facts.ahead_dicts;
  return l;
}

// The same answer both ways: the model written back out byte for byte, or the same error at the same offset.
void expect_same(std::span<const uint8_t> bytes, const std::string& what, uint64_t* ahead = nullptr) {
  const Loaded alone = load(bytes, LoadOptions::Ahead::kNever);
  const Loaded both = load(bytes, LoadOptions::Ahead::kAlways);
  EXPECT_EQ(alone.ahead, 0u);
  ASSERT_EQ(alone.snap.ok(), both.snap.ok())
      << what << ": " << (alone.snap.ok() ? both.snap : alone.snap).error().describe();
  if (!alone.snap.ok()) {
    EXPECT_EQ(alone.snap.error().describe(), both.snap.error().describe()) << what;
    return;
  }
  EXPECT_TRUE(write_snapshot(alone.snap.value()) == write_snapshot(both.snap.value())) << what;
  if (ahead) *ahead += both.ahead;
}

TEST(DecodeAhead, EveryFixtureLoadsTheSame) {
  namespace fs = std::filesystem;
  size_t files = 0;
  uint64_t ahead = 0;
  for (const auto& e : fs::recursive_directory_iterator(ALLOCSCOPE_FIXTURES)) {
    const std::string path = e.path().string();
    if (!e.is_regular_file() || !(path.ends_with(".pickle.gz") || path.ends_with(".pickle"))) continue;
    auto f = read_file(path);
    ASSERT_TRUE(f.ok()) << path;
    const std::vector<uint8_t> bytes = is_gzip(f.value()) ? gunzip(f.value()).value() : f.value();
    expect_same(bytes, path, &ahead);
    ++files;
  }
  EXPECT_GE(files, 100u);
  // The thread did decode: of the 1M-event file's entries alone there are 1M (how many it reaches depends on the
  // two threads' speeds, never the answer).
  EXPECT_GT(ahead, 1000u);
}

// A 0x7D byte (EMPTY_DICT) inside a number, a string or a frame list makes the thread decode "an entry" that is not
// one; planted at random places, and with bytes cut or changed, the answer stays the one without the thread.
TEST(DecodeAhead, MangledInputsAnswerAsWithoutIt) {
  for (const char* name : {"oom.pickle", "torch211_cpp_pickler.pickle.gz", "external/pt21_select_n_4dev.pickle.gz"}) {
    const std::vector<uint8_t> clean = testing::raw_fixture(name);
    ASSERT_FALSE(clean.empty()) << name;
    std::mt19937_64 rng(12345);
    for (int round = 0; round < 60; ++round) {
      std::vector<uint8_t> b = clean;
      const int edits = 1 + static_cast<int>(rng() % 6);
      for (int k = 0; k < edits; ++k) {
        const size_t at = rng() % b.size();
        switch (rng() % 4) {
          case 0: b[at] = 0x7D; break;                                   // EMPTY_DICT
          case 1: b[at] = static_cast<uint8_t>(rng()); break;            // any byte
          case 2: b[at] = static_cast<uint8_t>(b[at] ^ (1u << (rng() % 8))); break;
          default: b.resize(std::max<size_t>(at, 1)); break;             // cut
        }
      }
      expect_same(b, std::string(name) + " round " + std::to_string(round));
    }
  }
}

}  // namespace
}  // namespace allocscope
