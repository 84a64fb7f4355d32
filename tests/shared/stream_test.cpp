// Streaming loads: feeding the pickle in chunks of any size (down to single bytes) gives the same model as loading
// it whole, a cut input is reported at finish(), and error offsets count from the start of the whole input.
#include <gtest/gtest.h>

#include <filesystem>

#include "allocscope/loader.h"
#include "allocscope/pickle.h"
#include "allocscope/writer.h"
#include "fixtures.h"

namespace allocscope {
namespace {

Result<Snapshot> load_in_chunks(const std::vector<uint8_t>& bytes, size_t chunk) {
  SnapshotStream s({}, bytes.size());
  for (size_t at = 0; at < bytes.size(); at += chunk) {
    Status st = s.feed({bytes.data() + at, std::min(chunk, bytes.size() - at)});
    if (!st.ok()) return st.error();
  }
  return s.finish();
}

TEST(Stream, AnyChunkSizeGivesTheSameModel) {
  const auto bytes = testing::raw_fixture("oom.pickle");
  auto whole = load_snapshot(bytes);
  ASSERT_TRUE(whole.ok()) << whole.error().describe();
  for (size_t chunk : {size_t{1}, size_t{2}, size_t{3}, size_t{7}, size_t{64}, size_t{1000}, bytes.size()}) {
    auto r = load_in_chunks(bytes, chunk);
    ASSERT_TRUE(r.ok()) << "chunk " << chunk << ": " << r.error().describe();
    testing::expect_same_model(whole.value(), r.value());
  }
}

TEST(Stream, LargerFixturesInOddChunks) {
  // torch211_cpp_pickler: PyTorch's C++ pickler stores each entry after SETITEMS, so some cut lands between the
  // SETITEMS that counted an entry into its list and the BINPUT that stores it (Reader::Impl::absorbed_end).
  for (const char* name : {"resnet50_train.pickle", "expandable_segments.pickle", "gpt2_cpp.pickle.gz",
                           "torch211_cpp_pickler.pickle.gz"}) {
    const auto bytes = testing::raw_fixture(name);
    auto whole = load_snapshot(bytes);
    ASSERT_TRUE(whole.ok());
    auto r = load_in_chunks(bytes, 4093);  // a prime: cuts land inside every kind of opcode
    ASSERT_TRUE(r.ok()) << name << ": " << r.error().describe();
    testing::expect_same_model(whole.value(), r.value());
    EXPECT_EQ(r->source_bytes, bytes.size());
  }
}

// The reader decodes trace entries and frames on a fast path when a whole entry lies in its buffer (entry_fast,
// machine.h), and opcode by opcode otherwise. Fed 7 bytes at a time it never has a whole entry, so this compares the
// two paths on every real snapshot we keep: the model, written back out, must be the same byte for byte.
TEST(Stream, FastAndGeneralPathsAgreeOnEveryFixture) {
  namespace fs = std::filesystem;
  size_t files = 0, fast_files = 0;
  for (const auto& e : fs::recursive_directory_iterator(ALLOCSCOPE_FIXTURES)) {
    const std::string path = e.path().string();
    const bool gz = path.ends_with(".pickle.gz");
    if (!e.is_regular_file() || !(gz || path.ends_with(".pickle")) || path.find("gpt2_big_1M") != std::string::npos)
      continue;
    auto f = read_file(path);
    ASSERT_TRUE(f.ok()) << path;
    std::vector<uint8_t> bytes = gz ? gunzip(f.value()).value() : f.value();
    if (bytes.size() > (24u << 20)) continue;  // seconds each at 7 bytes a feed
    LoadOptions::PickleFacts facts;
    LoadOptions opt;
    opt.facts = &facts;
    auto whole = load_snapshot(bytes, opt);
    auto slow = load_in_chunks(bytes, 7);
    ASSERT_EQ(whole.ok(), slow.ok()) << path << ": " << (whole.ok() ? slow : whole).error().describe();
    if (!whole.ok()) {
      EXPECT_EQ(whole.error().describe(), slow.error().describe()) << path;
      continue;
    }
    ++files;
    EXPECT_TRUE(write_snapshot(whole.value()) == write_snapshot(slow.value())) << path;
    // Where a file has a trace, the fast path took nearly all of it (each distinct stack's first entry, and a
    // frame list not repeated before, take the general path).
    const size_t rows = whole->events.size_rows();
    if (rows >= 1000) {
      ++fast_files;
      EXPECT_GT(facts.fast_dicts, rows / 2) << path << ": the fast path decoded " << facts.fast_dicts << " of " << rows;
    }
  }
  EXPECT_GE(files, 60u);
  EXPECT_GE(fast_files, 30u);
}

TEST(Stream, GzipLoadInflatesWhileParsing) {
  // load_snapshot streams gzip through the parser; it must equal loading the inflated bytes.
  auto gz = read_file(testing::fixture("gpt2_cpp.pickle.gz"));
  ASSERT_TRUE(gz.ok());
  auto a = load_snapshot(gz.value());
  auto b = load_snapshot(gunzip(gz.value()).value());
  ASSERT_TRUE(a.ok() && b.ok());
  testing::expect_same_model(a.value(), b.value());
}

TEST(Stream, TruncationIsReportedAtFinishWithTheOffset) {
  const auto bytes = testing::raw_fixture("linear_seed.pickle");
  for (size_t cut : {size_t{1}, size_t{100}, bytes.size() / 2, bytes.size() - 1}) {
    std::vector<uint8_t> part(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(cut));
    SnapshotStream s;
    for (size_t at = 0; at < part.size(); at += 5) ASSERT_TRUE(s.feed({part.data() + at, std::min<size_t>(5, part.size() - at)}).ok());
    auto r = s.finish();
    ASSERT_FALSE(r.ok()) << cut;
    EXPECT_LE(r.error().offset, cut) << r.error().describe();
    EXPECT_NE(r.error().message.find("truncated"), std::string::npos) << r.error().describe();
  }
}

TEST(Stream, ErrorOffsetsCountFromTheStartOfTheInput) {
  // A list of 700 ints ends "... APPENDS STOP"; dropping those two bytes leaves a prefix that ends between opcodes.
  pickle::Writer w;
  w.begin_list();
  for (int i = 0; i < 700; ++i) w.integer(i * 100003);
  w.end_list();
  std::vector<uint8_t> bytes = w.finish();
  bytes.resize(bytes.size() - 2);
  const uint64_t global_at = bytes.size();
  bytes.push_back('c');  // GLOBAL: refused wherever it is
  for (size_t chunk : {size_t{1}, size_t{999}, size_t{5000}}) {
    SnapshotStream s;
    Status last;
    for (size_t at = 0; at < bytes.size() && last.ok(); at += chunk)
      last = s.feed({bytes.data() + at, std::min(chunk, bytes.size() - at)});
    auto r = s.finish();
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("never executes"), std::string::npos) << r.error().describe();
    EXPECT_EQ(r.error().offset, global_at) << "chunk " << chunk;
    EXPECT_FALSE(s.feed(bytes).ok());  // errors are sticky
  }
}

TEST(Stream, GzipFedToTheStreamIsRefused) {
  auto gz = read_file(testing::fixture("gpt2_cpp.pickle.gz"));
  SnapshotStream s;
  EXPECT_FALSE(s.feed(gz.value()).ok());
}

}  // namespace
}  // namespace allocscope
