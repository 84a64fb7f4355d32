// Writer round trips: load -> write -> load gives an equal model, and Python's pickle reads what we write.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "allocscope/loader.h"
#include "allocscope/pickle.h"
#include "allocscope/writer.h"
#include "fixtures.h"

namespace allocscope {
namespace {

// Models are equal when every table says the same thing (ids may differ: compare through the strings).
void expect_same(const Snapshot& a, const Snapshot& b) {
  auto frame_text = [](const Snapshot& s, FrameId f) {
    return std::string(s.str(s.frames[f].name)) + "|" + std::string(s.str(s.frames[f].filename)) + "|" +
           std::to_string(s.frames[f].line);
  };
  auto stack_text = [&](const Snapshot& s, StackId id) {
    std::string out;
    for (FrameId f : s.stack(id)) out += frame_text(s, f) + ";";
    return out;
  };
  ASSERT_EQ(a.devices.size(), b.devices.size());
  for (size_t d = 0; d < a.devices.size(); ++d) EXPECT_EQ(a.devices[d].count(), b.devices[d].count());
  const EventColumns& x = a.events;
  const EventColumns& y = b.events;
  ASSERT_EQ(x.size_rows(), y.size_rows());
  EXPECT_EQ(x.action, y.action);
  EXPECT_EQ(x.addr, y.addr);
  EXPECT_EQ(x.size, y.size);
  EXPECT_EQ(x.stream, y.stream);
  EXPECT_EQ(x.time_us, y.time_us);
  for (size_t i = 0; i < x.size_rows(); ++i) {
    ASSERT_EQ(stack_text(a, x.stack[i]), stack_text(b, y.stack[i])) << "row " << i;
    ASSERT_EQ(a.str(x.compile_context[i]), b.str(y.compile_context[i]));
    ASSERT_EQ(a.str(x.user_metadata[i]), b.str(y.user_metadata[i]));
  }
  ASSERT_EQ(a.segments.size(), b.segments.size());
  for (size_t i = 0; i < a.segments.size(); ++i) {
    const Segment& s = a.segments[i];
    const Segment& t = b.segments[i];
    EXPECT_EQ(s.address, t.address);
    EXPECT_EQ(s.total_size, t.total_size);
    EXPECT_EQ(s.allocated_size, t.allocated_size);
    EXPECT_EQ(s.requested_size, t.requested_size);
    EXPECT_EQ(s.active_size, t.active_size);
    EXPECT_EQ(s.stream, t.stream);
    EXPECT_EQ(s.is_expandable, t.is_expandable);
    EXPECT_EQ(s.pool_id[0], t.pool_id[0]);
    EXPECT_EQ(s.pool_id[1], t.pool_id[1]);
    EXPECT_EQ(a.str(s.segment_type), b.str(t.segment_type));
    EXPECT_EQ(stack_text(a, s.stack), stack_text(b, t.stack));
    ASSERT_EQ(s.num_blocks, t.num_blocks);
    for (uint32_t k = 0; k < s.num_blocks; ++k) {
      const Block& p = a.blocks[s.first_block + k];
      const Block& q = b.blocks[t.first_block + k];
      EXPECT_EQ(p.address, q.address);
      EXPECT_EQ(p.size, q.size);
      EXPECT_EQ(p.requested_size, q.requested_size);
      EXPECT_EQ(p.state, q.state);
      EXPECT_EQ(stack_text(a, p.stack), stack_text(b, q.stack));
    }
  }
  ASSERT_EQ(a.annotations.size(), b.annotations.size());
  for (size_t i = 0; i < a.annotations.size(); ++i) {
    EXPECT_EQ(a.annotations[i].start, b.annotations[i].start);
    EXPECT_EQ(a.str(a.annotations[i].name), b.str(b.annotations[i].name));
    EXPECT_EQ(a.annotations[i].time_us, b.annotations[i].time_us);
  }
  EXPECT_EQ(a.allocator_settings, b.allocator_settings);
}

class RoundTrip : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(RoundTrip, LoadWriteLoadIsEqual) {
  auto a = load_snapshot_file(testing::fixture(GetParam().second));
  ASSERT_TRUE(a.ok()) << a.error().describe();
  std::vector<uint8_t> out = write_snapshot(a.value());
  auto b = load_snapshot(out);
  ASSERT_TRUE(b.ok()) << b.error().describe();
  expect_same(a.value(), b.value());
}

INSTANTIATE_TEST_SUITE_P(SmallFixtures, RoundTrip,
                         ::testing::Values(std::make_pair("oom", "oom.pickle"),
                                           std::make_pair("ddp_rank1", "ddp_rank1.pickle"),
                                           std::make_pair("expandable", "expandable_segments.pickle"),
                                           std::make_pair("gpt2_cpp", "gpt2_cpp.pickle.gz"),
                                           std::make_pair("resnet50", "resnet50_train.pickle")),
                         [](const auto& info) { return info.param.first; });

TEST(Writer, ExtremeIntegersSurvive) {
  Snapshot s;
  s.has_device_traces = true;
  s.devices.push_back(DeviceTrace{0, 0, 3});
  const uint64_t addrs[] = {0, 0xffffffffffffffffULL, 0x8000000000000000ULL};
  for (uint64_t a : addrs) {
    s.events.action.push_back(Action::kAlloc);
    s.events.addr.push_back(a);
    s.events.size.push_back(a / 3);
    s.events.stream.push_back(-1);
    s.events.time_us.push_back(-5);
    s.events.stack.push_back(0);
    s.events.compile_context.push_back(0);
    s.events.user_metadata.push_back(0);
  }
  auto b = load_snapshot(write_snapshot(s));
  ASSERT_TRUE(b.ok()) << b.error().describe();
  EXPECT_EQ(b->events.addr, s.events.addr);
  EXPECT_EQ(b->events.size, s.events.size);
  EXPECT_EQ(b->events.stream, s.events.stream);
}

TEST(Writer, FramesAreMemoizedSoOutputStaysSmall) {
  auto a = load_snapshot_file(testing::fixture("resnet50_train.pickle"));
  ASSERT_TRUE(a.ok());
  std::vector<uint8_t> out = write_snapshot(a.value());
  // Each frame reference is a 2-5 byte BINGET, so we stay near the size of what Python wrote.
  EXPECT_LT(out.size(), a->source_bytes * 2);
}

// stream_to hands the output over in chunks instead of holding it (make_big_trace's 18 GB file): the chunks, put
// together, are the bytes write_snapshot returns, and no chunk but the last is shorter than asked.
TEST(Writer, StreamedOutputIsTheSameBytesInChunks) {
  auto a = load_snapshot_file(testing::fixture("resnet50_train.pickle"));
  ASSERT_TRUE(a.ok());
  const std::vector<uint8_t> whole = write_snapshot(a.value());
  std::vector<uint8_t> joined;
  std::vector<size_t> sizes;
  pickle::Writer w;
  w.stream_to([&](std::span<const uint8_t> b) {
    joined.insert(joined.end(), b.begin(), b.end());
    sizes.push_back(b.size());
  }, 4096);
  EXPECT_TRUE(write_snapshot_value(a.value(), &w).empty());
  EXPECT_EQ(joined, whole);
  ASSERT_GT(sizes.size(), 100u);
  for (size_t i = 0; i + 1 < sizes.size(); ++i) ASSERT_GE(sizes[i], 4096u) << "chunk " << i;
}

TEST(Writer, WriteFileIsAtomicAndGzipsByName) {
  auto a = load_snapshot_file(testing::fixture("oom.pickle"));
  ASSERT_TRUE(a.ok());
  const std::string dir = ::testing::TempDir();
  const std::string gz = dir + "/allocscope_writer_test.pickle.gz";
  ASSERT_TRUE(write_snapshot_file(a.value(), gz).ok());
  auto raw = read_file(gz);
  ASSERT_TRUE(raw.ok());
  EXPECT_TRUE(is_gzip(raw.value()));
  // The temporary (PATH.partial.PID.N) is gone.
  for (const auto& e : std::filesystem::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find("allocscope_writer_test.pickle.gz.partial"), std::string::npos)
        << e.path();
  auto b = load_snapshot(raw.value());
  ASSERT_TRUE(b.ok()) << b.error().describe();
  expect_same(a.value(), b.value());
  EXPECT_FALSE(write_snapshot_file(a.value(), "/nonexistent-dir/x.pickle").ok());
  std::remove(gz.c_str());
}

// Python's own pickle must read what we write (and see the same numbers). Skipped where python3 is absent.
TEST(Writer, PythonPickleLoadsOurOutput) {
  if (std::system("python3 -c 'import pickle' >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 not available";
  auto a = load_snapshot_file(testing::fixture("expandable_segments.pickle"));
  ASSERT_TRUE(a.ok());
  const std::string path = ::testing::TempDir() + "/allocscope_py_check.pickle";
  ASSERT_TRUE(write_snapshot_file(a.value(), path).ok());
  const std::string script =
      "import pickle,sys\n"
      "d=pickle.load(open(sys.argv[1],'rb'))\n"
      "t=d['device_traces'][0]\n"
      "print(len(d['segments']), len(t), sum(e['size'] for e in t), t[5]['frames'][0]['name'],"
      " d['allocator_settings']['expandable_segments'])\n";
  const std::string py = ::testing::TempDir() + "/allocscope_py_check.py";
  std::ofstream(py) << script;
  FILE* f = popen(("python3 " + py + " " + path).c_str(), "r");
  ASSERT_NE(f, nullptr);
  char buf[512] = {0};
  ASSERT_NE(fgets(buf, sizeof buf, f), nullptr);
  pclose(f);
  uint64_t total = 0;
  for (uint32_t i = a->devices[0].begin; i < a->devices[0].end; ++i) total += a->events.size[i];
  const FrameId top = a->stack(a->events.stack[a->devices[0].begin + 5])[0];
  const std::string expected = std::to_string(a->segments.size()) + " " + std::to_string(a->devices[0].count()) +
                               " " + std::to_string(total) + " " + std::string(a->str(a->frames[top].name)) +
                               " True\n";
  EXPECT_EQ(std::string(buf), expected);
  std::remove(path.c_str());
  std::remove(py.c_str());
}

}  // namespace
}  // namespace allocscope
