// PyTorch's trace_plot and segment_plot pages (tests/fixtures/pages, written by PyTorch 2.11's own _memory_viz with
// generators/gen_pages.py) open as the snapshot they carry, whole, gzipped, and streamed in any chunks; files users
// open by mistake (torch.save's zip, JSON that is not a snapshot, other pages) are named with what to do, at byte 0.
#include <gtest/gtest.h>

#include <string>

#include "allocscope/loader.h"
#include "fixtures.h"

namespace allocscope {
namespace {

std::vector<uint8_t> bytes_of(const std::string& text) { return {text.begin(), text.end()}; }

using testing::expect_same_model;

TEST(Pages, EachPyTorchPageOpensAsTheSnapshotItCarries) {
  for (const auto& [page, pickle] : std::vector<std::pair<std::string, std::string>>{
           {"pages/linear_seed.trace_plot.html", "linear_seed.pickle"},
           {"pages/linear_seed.segment_plot.html", "linear_seed.pickle"},
           {"pages/expandable_segments.trace_plot.html", "expandable_segments.pickle"},
           {"pages/gpt2_cpp.trace_plot.html.gz", "gpt2_cpp.pickle.gz"}}) {
    SCOPED_TRACE(page);
    auto from_page = load_snapshot_file(testing::fixture(page));
    ASSERT_TRUE(from_page.ok()) << from_page.error().describe();
    auto from_pickle = load_snapshot_file(testing::fixture(pickle));
    ASSERT_TRUE(from_pickle.ok());
    expect_same_model(from_page.value(), from_pickle.value());
    // The viewer's way: the page streamed in chunks as a browser reads a file.
    const std::vector<uint8_t> bytes = testing::raw_fixture(page);
    for (size_t chunk : {size_t{1} << 16, size_t{977}}) {
      SnapshotStream s({}, bytes.size());
      for (size_t at = 0; at < bytes.size(); at += chunk)
        ASSERT_TRUE(s.feed({bytes.data() + at, std::min(chunk, bytes.size() - at)}).ok());
      auto streamed = s.finish();
      ASSERT_TRUE(streamed.ok()) << streamed.error().describe();
      expect_same_model(streamed.value(), from_pickle.value());
    }
  }
}

// The stream decides "page or pickle" by the rule load_snapshot applies to the whole input, however the first bytes
// are split: a byte order mark and spaces fed one byte at a time, and a page behind more spaces than the rule reads.
TEST(Pages, TheStreamDecidesAsTheWholeLoadDoes) {
  const std::vector<uint8_t> page = testing::raw_fixture("pages/linear_seed.trace_plot.html");
  auto streamed = [](const std::vector<uint8_t>& bytes, size_t chunk) -> Result<Snapshot> {
    SnapshotStream s;
    for (size_t at = 0; at < bytes.size(); at += chunk)
      ALLOCSCOPE_RETURN_IF_ERROR(s.feed({bytes.data() + at, std::min(chunk, bytes.size() - at)}));
    return s.finish();
  };
  std::vector<uint8_t> marked = bytes_of("\xef\xbb\xbf \n\t");
  marked.insert(marked.end(), page.begin(), page.end());
  std::vector<uint8_t> far = std::vector<uint8_t>(70000, ' ');
  far.insert(far.end(), page.begin(), page.end());
  for (const auto& [bytes, loads] : std::vector<std::pair<std::vector<uint8_t>, bool>>{
           {marked, true}, {far, false}, {bytes_of("   \n "), false}, {bytes_of("\xef\xbb"), false}}) {
    const auto whole = load_snapshot(bytes);
    EXPECT_EQ(whole.ok(), loads) << bytes.size() << (whole.ok() ? "" : ": " + whole.error().describe());
    for (size_t chunk : {size_t{1}, size_t{2}, size_t{4096}}) {
      const auto r = streamed(bytes, chunk);
      EXPECT_EQ(r.ok(), loads) << bytes.size() << " in chunks of " << chunk << (r.ok() ? "" : ": " + r.error().describe());
    }
  }
}

TEST(Pages, ABrokenPageSaysWhatIsWrongWithIt) {
  const std::vector<uint8_t> file = testing::raw_fixture("pages/linear_seed.trace_plot.html");
  const std::string page(file.begin(), file.end());
  const size_t b64 = page.find("\"base64\": \"") + 11;
  ASSERT_NE(b64, std::string::npos + 11);
  // Cut inside the base64 text: the list is no longer JSON.
  auto cut = load_snapshot(bytes_of(page.substr(0, b64 + 100)));
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.error().message.find("'local_files' is not a list"), std::string::npos) << cut.error().describe();
  EXPECT_EQ(cut.error().offset, page.find("const local_files = ") + 20);
  // A character base64 does not have.
  std::string bad = page;
  bad[b64 + 8] = '!';
  auto odd = load_snapshot(bytes_of(bad));
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.error().message.find("not base64 at character 8"), std::string::npos) << odd.error().describe();
  // Valid base64 of a pickle that is not whole: the error is inside the carried snapshot, and says so.
  std::string shortened = page;
  shortened.replace(b64, page.find('"', b64) - b64, "gAR9");  // PROTO 4, EMPTY_DICT, and no STOP
  auto inner = load_snapshot(bytes_of(shortened));
  ASSERT_FALSE(inner.ok());
  EXPECT_EQ(inner.error().message.rfind("in the snapshot this trace_plot / segment_plot page carries, at byte ", 0), 0u)
      << inner.error().describe();
  // Some other page.
  auto other = load_snapshot(bytes_of("<!DOCTYPE html>\n<html><body>memory report</body></html>\n"));
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.error().message.find("not one of PyTorch's trace_plot or segment_plot pages"), std::string::npos);
}

TEST(Pages, FilesThatAreNotSnapshotsAreNamedAtByteZero) {
  // torch.save writes a zip; 'P' is a pickle opcode (PERSID), which the loader named instead.
  const std::vector<uint8_t> zip = bytes_of(std::string("PK\x03\x04", 4) + std::string(60, '\0') + "archive/data.pkl");
  for (auto r : {load_snapshot(zip)}) {
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("torch.save"), std::string::npos) << r.error().describe();
    EXPECT_EQ(r.error().offset, 0u);
  }
  SnapshotStream s;
  const Status fed = s.feed(zip);
  ASSERT_FALSE(fed.ok());
  EXPECT_NE(fed.error().message.find("torch.save"), std::string::npos);
  // JSON that is not a snapshot (JSON snapshots themselves: json_snapshot_test.cpp).
  for (const auto& [json, says] : std::vector<std::pair<std::string, std::string>>{
           {"{\"traceEvents\": []}", "JSON, but not a memory snapshot"}, {"\n  [1, 2]", "JSON, but not a memory snapshot: it holds a list of int"}}) {
    auto r = load_snapshot(bytes_of(json));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message.rfind(says, 0), 0u) << r.error().describe();
  }
  EXPECT_FALSE(check_snapshot_start(zip).ok());
  EXPECT_TRUE(check_snapshot_start(bytes_of("  <html>")).ok());
  EXPECT_TRUE(check_snapshot_start(testing::raw_fixture("linear_seed.pickle")).ok());
}

}  // namespace
}  // namespace allocscope
