// A .gz loads with inflating on a second thread beside the parser (loader.cpp inflate_beside): the same model as
// parsing the inflated bytes, and every way it can stop (a corrupt pickle while inflating goes on, a truncated or
// corrupt gzip stream, the inflated-size limit) is an error with an offset, never a hang. Also run under
// ThreadSanitizer (label "threads").
#include <gtest/gtest.h>

#include <algorithm>

#include "allocscope/loader.h"
#include "fixtures.h"

namespace allocscope {
namespace {

std::vector<uint8_t> file(const std::string& name) {
  auto f = read_file(testing::fixture(name));
  EXPECT_TRUE(f.ok());
  return f.ok() ? f.value() : std::vector<uint8_t>{};
}

TEST(LoaderThreads, GzipEqualsInflatedBytes) {
  for (const char* name : {"gpt2_cpp.pickle.gz", "external/pt26_cs336_fullstep.pickle.gz"}) {
    const std::vector<uint8_t> gz = file(name);
    auto raw = gunzip(gz);
    ASSERT_TRUE(raw.ok());
    auto a = load_snapshot(gz), b = load_snapshot(raw.value());
    ASSERT_TRUE(a.ok()) << a.error().describe();
    ASSERT_TRUE(b.ok()) << b.error().describe();
    EXPECT_EQ(a->events.action, b->events.action) << name;
    EXPECT_EQ(a->events.addr, b->events.addr) << name;
    EXPECT_EQ(a->events.size, b->events.size) << name;
    EXPECT_EQ(a->events.stack, b->events.stack) << name;
    EXPECT_EQ(a->frames.size(), b->frames.size()) << name;
    EXPECT_EQ(a->segments.size(), b->segments.size()) << name;
    EXPECT_EQ(a->source_bytes, b->source_bytes) << name;
  }
}

// Many chunks (a 12 MB .gz inflates to 162 MB = 40 chunks of 4 MB): the queue fills and drains many times.
TEST(LoaderThreads, ManyChunksAndAPickleErrorMidway) {
  const std::vector<uint8_t> gz = file("gpt2_big_1M.pickle.gz");
  auto raw = gunzip(gz);
  ASSERT_TRUE(raw.ok());
  auto whole = load_snapshot(gz);
  ASSERT_TRUE(whole.ok()) << whole.error().describe();
  EXPECT_EQ(whole->events.size_rows(), 1000000u);
  // 4 KB of 0xff (not an opcode; no string in a snapshot is that long) at 100 MB: the parser stops while the
  // inflater still has 60 MB to go.
  std::vector<uint8_t> bad = raw.value();
  const size_t at = 100u << 20;
  std::fill(bad.begin() + at, bad.begin() + at + 4096, 0xff);
  auto regz = gzip(bad, 1);
  ASSERT_TRUE(regz.ok());
  auto r = load_snapshot(regz.value());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().offset, Error::kNoOffset);
  EXPECT_LE(r.error().offset, at + 4096) << r.error().describe();
  EXPECT_GE(r.error().offset + 4096, at) << r.error().describe();
}

TEST(LoaderThreads, BrokenGzipAndLimitsStopBothSides) {
  const std::vector<uint8_t> gz = file("gpt2_cpp.pickle.gz");
  // Truncated: the inflater stops early; the parser then finds the pickle cut.
  std::vector<uint8_t> cut(gz.begin(), gz.begin() + static_cast<long>(gz.size() / 2));
  EXPECT_FALSE(load_snapshot(cut).ok());
  // Corrupt deflate data in the middle.
  std::vector<uint8_t> corrupt = gz;
  for (size_t i = gz.size() / 3; i < gz.size() / 3 + 64; ++i) corrupt[i] ^= 0x5a;
  auto c = load_snapshot(corrupt);
  EXPECT_FALSE(c.ok());
  // The inflated-size limit (a gzip bomb) stops the inflater; the parser is not left waiting.
  LoadOptions small;
  small.max_inflated_bytes = 1u << 16;
  auto l = load_snapshot(gz, small);
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.error().message.find("exceeds"), std::string::npos) << l.error().describe();
}

}  // namespace
}  // namespace allocscope
