// The first picture of a file still being read (allocscope/preview.h): extended after every chunk of a streamed
// load, its curve is the one read in one go, its memory stays fixed, and its highest level plus the bytes alive
// before the trace is PyTorch's own Active Memory Timeline peak (MemoryViz.js's max_size, expected/*.memoryviz.json).
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "allocscope/lifetimes.h"
#include "allocscope/loader.h"
#include "allocscope/preview.h"
#include "fixtures.h"

namespace allocscope {
namespace {

TEST(Preview, StreamedCurveIsTheWholeOnesAndMatchesPyTorchsPeak) {
  int checked = 0;
  for (const auto& [base, file] : testing::all_fixtures()) {
    std::ifstream golden(testing::expected_file(base, "memoryviz.json"));
    if (!golden) continue;
    const nlohmann::json mv = nlohmann::json::parse(golden);
    const auto bytes = testing::raw_fixture(file);
    // 16 columns, so a trace of a few hundred rows already halves its columns several times mid-stream.
    PreviewCurve streamed(16);
    SnapshotStream stream({}, bytes.size());
    for (size_t at = 0; at < bytes.size(); at += 65521) {
      ASSERT_TRUE(stream.feed({bytes.data() + at, std::min<size_t>(65521, bytes.size() - at)}).ok()) << base;
      streamed.extend(stream.events_so_far());
      EXPECT_LE(streamed.low().size(), 16u) << base;
    }
    PreviewCurve whole(16);
    whole.extend(stream.events_so_far());
    EXPECT_EQ(streamed.rows(), whole.rows()) << base;
    EXPECT_EQ(streamed.low(), whole.low()) << base;
    EXPECT_EQ(streamed.high(), whole.high()) << base;
    EXPECT_EQ(streamed.highest(), whole.highest()) << base;
    auto snap = stream.finish();
    ASSERT_TRUE(snap.ok()) << base << ": " << snap.error().describe();
    EXPECT_EQ(streamed.rows(), snap->events.size_rows()) << base;
    // A file of one traced device: its rows are that device's trace, in order.
    if (snap->devices.size() != 1 || !mv["devices"].contains("0")) continue;
    const DeviceLifetimes lt = build_device_lifetimes(snap.value(), 0);
    EXPECT_EQ(static_cast<uint64_t>(streamed.highest()) + lt.total[0], mv["devices"]["0"]["peak_active_bytes"].get<uint64_t>())
        << base << ": the preview's highest (" << streamed.highest() << ") plus what was alive before the trace ("
        << lt.total[0] << ")";
    ++checked;
  }
  EXPECT_GE(checked, 6);
}

// Columns halve as the rows outgrow them: each column's range is its rows' range, whatever the order of the halvings.
TEST(Preview, ColumnsHoldTheirRowsRange) {
  EventColumns e;
  auto row = [&](Action a, uint64_t size) {
    e.action.push_back(a), e.addr.push_back(0), e.size.push_back(size), e.stream.push_back(0), e.time_us.push_back(0);
  };
  std::vector<int64_t> levels;
  int64_t level = 0;
  for (int i = 0; i < 1000; ++i) {
    const bool alloc = (i * 7919) % 3 != 0;
    const uint64_t size = 1 + (i * 104729) % 997;
    row(alloc ? Action::kAlloc : Action::kFreeCompleted, size);
    level += alloc ? static_cast<int64_t>(size) : -static_cast<int64_t>(size);
    levels.push_back(level);
    if (i % 3 == 0) row(Action::kFreeRequested, 5), levels.push_back(level);  // moves nothing: only completed frees do
  }
  PreviewCurve c(8);
  c.extend(e);
  ASSERT_EQ(c.rows(), levels.size());
  ASSERT_LE(c.low().size(), 8u);
  for (size_t col = 0; col < c.low().size(); ++col) {
    const size_t first = col * c.rows_per_column(), last = std::min(levels.size(), first + c.rows_per_column());
    EXPECT_EQ(c.low()[col], *std::min_element(levels.begin() + first, levels.begin() + last)) << col;
    EXPECT_EQ(c.high()[col], *std::max_element(levels.begin() + first, levels.begin() + last)) << col;
  }
  const auto top = std::max_element(levels.begin(), levels.end());
  EXPECT_EQ(c.highest(), *top);
  EXPECT_EQ(c.highest_row(), static_cast<uint64_t>(top - levels.begin()) + 1);
  EXPECT_EQ(c.level(), levels.back());
}

// A hostile file's sizes near 2^64 saturate the level instead of wrapping it (no undefined behaviour under UBSan).
TEST(Preview, HugeSizesSaturate) {
  EventColumns e;
  for (int i = 0; i < 8; ++i)
    e.action.push_back(Action::kAlloc), e.addr.push_back(0), e.size.push_back(~uint64_t{0}), e.stream.push_back(0),
        e.time_us.push_back(0);
  PreviewCurve c;
  c.extend(e);
  EXPECT_EQ(c.level(), INT64_MAX);
  EXPECT_EQ(c.highest(), INT64_MAX);
}

}  // namespace
}  // namespace allocscope
