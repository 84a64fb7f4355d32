// `compare`: segments keyed by (address, total size) present in only one snapshot, on the DDP ranks and by hand.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "allocscope/memviz.h"
#include "synthetic.h"
#include "test_util.h"

namespace {

using allocscope::BlockState;
namespace mv = allocscope::memviz;

std::vector<uint64_t> only_in(const allocscope::Snapshot& a, const allocscope::Snapshot& b) {
  std::set<std::pair<uint64_t, uint64_t>> keys, seen;
  for (const auto& seg : b.segments) keys.insert({seg.address, seg.total_size});
  std::vector<uint64_t> out;
  for (const auto& seg : a.segments)
    if (!keys.count({seg.address, seg.total_size}) && seen.insert({seg.address, seg.total_size}).second)
      out.push_back(seg.address);
  return out;
}

TEST(Compare, DdpRanks) {
  const auto& r0 = clitest::fixture("ddp_rank0");
  const auto& r1 = clitest::fixture("ddp_rank1");
  const mv::CompareResult r = mv::compare(r0, r1);
  EXPECT_EQ(r.only_before, only_in(r0, r1));
  EXPECT_EQ(r.only_after, only_in(r1, r0));
  EXPECT_FALSE(r.only_after.empty());  // rank 1 keeps extra 64 MiB buffers
  EXPECT_EQ(r.summary.rfind("only_before = [", 0), 0u);
  EXPECT_NE(r.summary.find("\nonly_after = ["), std::string::npos);
  // Every folded line belongs to a listed segment, before-lines first.
  bool seen_after = false;
  for (const std::string& line : clitest::lines(r.folded)) {
    const bool before = line.rfind("only_before;stream_", 0) == 0;
    const bool after = line.rfind("only_after;stream_", 0) == 0;
    ASSERT_TRUE(before || after) << line;
    if (after) seen_after = true;
    EXPECT_FALSE(before && seen_after) << "only_before lines come first";
    const size_t seg = line.find(";seg_") + 5;
    const uint64_t addr = std::stoull(line.substr(seg, line.find(';', seg) - seg));
    const auto& list = before ? r.only_before : r.only_after;
    EXPECT_NE(std::find(list.begin(), list.end(), addr), list.end()) << line;
  }
  EXPECT_TRUE(seen_after);
}

TEST(Compare, SnapshotWithItselfIsEmpty) {
  const auto& s = clitest::fixture("resnet50_train");
  const mv::CompareResult r = mv::compare(s, s);
  EXPECT_EQ(r.summary, "only_before = []\nonly_after = []\n");
  EXPECT_EQ(r.folded, "");
}

TEST(Compare, ExactLines) {
  clitest::SnapshotBuilder a, b;
  const auto st = a.stack({{"forward", "/m/linear.py", 134}, {"PyEval_EvalFrame", "ceval.c", 1}, {"<module>", "t.py", 2}});
  a.segment(4096, 0, 0, {{2048, 1000, BlockState::kActiveAllocated, st}, {2048, 2048, BlockState::kInactive, 0}});
  a.segment(1 << 20, 7, 0, {{512, 512, BlockState::kInactive, 0}});
  b.segment(1 << 20, 7, 0, {{512, 512, BlockState::kInactive, 0}});  // same key: not listed
  b.segment(4096, 0, 0, {{1024, 1024, BlockState::kInactive, 0}});    // same address, other size: listed
  const mv::CompareResult r = mv::compare(a.s, b.s);
  EXPECT_EQ(r.summary, "only_before = [4096]\nonly_after = [4096]\n");
  EXPECT_EQ(r.folded,
            "only_before;stream_0;seg_4096;active_allocated;t.py:2:<module>;linear.py:134:forward 1000\n"
            "only_before;stream_0;seg_4096;active_allocated;<gaps> 1048\n"
            "only_before;stream_0;seg_4096;inactive;<non-python> 2048\n"
            "only_after;stream_0;seg_4096;inactive;<non-python> 1024\n");
}

TEST(Compare, CliStreams) {
  const std::string a = clitest::snapshot_path("ddp_rank0"), b = clitest::snapshot_path("ddp_rank1");
  const mv::CompareResult want = mv::compare(clitest::fixture("ddp_rank0"), clitest::fixture("ddp_rank1"));
  // Folded lines own stdout; the address lists go to stderr.
  const auto plain = clitest::run_cli({"compare", a, b});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.out, want.folded);
  EXPECT_EQ(plain.err, want.summary);
  // With -o the lists go to stdout as PyTorch prints them, and the graph to the file.
  const std::string svg = clitest::temp_path("compare.svg");
  const auto to_file = clitest::run_cli({"compare", a, b, "-o", svg});
  ASSERT_EQ(to_file.exit_code, 0) << to_file.err;
  EXPECT_EQ(to_file.out, want.summary);
  EXPECT_EQ(clitest::xml_problem(clitest::read_text(svg)), "");
  EXPECT_NE(clitest::read_text(svg).find("only_after"), std::string::npos);
}

}  // namespace
