// PyTorch's own `_memory_viz.py` outputs (tests/fixtures/expected) against ours, byte for byte, through both the
// shared functions and the built `allocscope` binary, for every fixture that has a golden file.
#include <gtest/gtest.h>

#include <algorithm>
#include <ostream>
#include <string_view>
#include <string>
#include <vector>

#include "allocscope/memviz.h"
#include "test_util.h"

namespace {

using clitest::expected_path;
using clitest::fixture;

struct Case {
  std::string fixture;
  std::string kind;  // stats.txt | trace.txt | segments.folded | memory.folded
};
// Readable test names in ctest's listing instead of a byte dump.
void PrintTo(const Case& c, std::ostream* os) { *os << c.fixture << "." << c.kind; }

std::vector<Case> golden_cases() {
  std::vector<Case> cases;
  for (const std::string& name : clitest::fixture_names())
    for (const char* kind : {"stats.txt", "trace.txt", "segments.folded", "memory.folded"})
      if (clitest::file_exists(expected_path(name, kind))) cases.push_back({name, kind});
  return cases;
}

std::string case_name(const testing::TestParamInfo<Case>& info) {
  std::string n = info.param.fixture + "_" + info.param.kind;
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

// The verb (CLI) and the shared function for each golden kind.
std::string verb_of(const std::string& kind) { return kind.substr(0, kind.find('.')); }

std::string shared_output(const allocscope::Snapshot& s, const std::string& kind) {
  namespace mv = allocscope::memviz;
  if (kind == "stats.txt") return mv::stats(s);
  if (kind == "trace.txt") return mv::trace(s);
  if (kind == "segments.folded") return mv::segments_folded(s);
  return mv::memory_folded(s);
}

// PyTorch's TOTAL MEM value is wrong by design of its loop (see docs/cli.md); blank every TOTAL MEM value, and
// the newline we add after it, so all other bytes must still match.
std::string without_total_mem(const std::string& text) {
  static const std::string kLabel = "TOTAL MEM: ";
  std::string out;
  size_t pos = 0;
  while (true) {
    const size_t at = text.find(kLabel, pos);
    out += text.substr(pos, at == std::string::npos ? std::string::npos : at + kLabel.size() - pos);
    if (at == std::string::npos) return out;
    size_t end = at + kLabel.size();
    // A size like -953.7MiB: sign, digits, '.', one digit, then B or [KMGTPEZY]iB.
    while (end < text.size() && std::string_view("-0123456789.").find(text[end]) != std::string_view::npos) ++end;
    if (end < text.size() && text[end] != 'B') end += 2;  // "Ki", "Mi", ...
    ++end;                                                 // "B"
    if (end < text.size() && text[end] == '\n') ++end;
    out += "*\n";
    pos = std::min(end, text.size());
  }
}

void expect_same(const std::string& ours, const std::string& golden, const std::string& what) {
  if (ours == golden) return;
  // Point at the first differing line instead of dumping megabytes.
  const auto a = clitest::lines(ours), b = clitest::lines(golden);
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  ADD_FAILURE() << what << ": differs from PyTorch at line " << i + 1 << " (ours has " << a.size()
                << " lines, PyTorch " << b.size() << ")\n  ours:    " << (i < a.size() ? a[i] : "<end>")
                << "\n  PyTorch: " << (i < b.size() ? b[i] : "<end>") << "\n  (bytes: ours " << ours.size()
                << ", PyTorch " << golden.size() << ")";
}

class SharedGolden : public testing::TestWithParam<Case> {};

TEST_P(SharedGolden, MatchesPyTorch) {
  const Case& c = GetParam();
  const std::string golden = clitest::read_golden(expected_path(c.fixture, c.kind));
  // An empty golden is real output (a file with no trace or no segments); an unreadable one is not.
  ASSERT_TRUE(clitest::file_exists(expected_path(c.fixture, c.kind)));
  const std::string ours = shared_output(fixture(c.fixture), c.kind);
  if (c.kind == "trace.txt") {
    expect_same(without_total_mem(ours), without_total_mem(golden), c.fixture + " trace (all but TOTAL MEM)");
    // With PyTorch's counter reproduced, every byte matches, the wrong total included.
    allocscope::memviz::TraceOptions pytorch;
    pytorch.pytorch_total = true;
    expect_same(allocscope::memviz::trace(fixture(c.fixture), pytorch), golden, c.fixture + " trace --pytorch-total");
  } else {
    expect_same(ours, golden, c.fixture + " " + c.kind);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SharedGolden, testing::ValuesIn(golden_cases()), case_name);

class CliGolden : public testing::TestWithParam<Case> {};

TEST_P(CliGolden, MatchesPyTorch) {
  const Case& c = GetParam();
  const std::string golden = clitest::read_golden(expected_path(c.fixture, c.kind));
  const auto r = clitest::run_cli({verb_of(c.kind), clitest::snapshot_path(c.fixture)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  if (c.kind == "trace.txt") {
    expect_same(without_total_mem(r.out), without_total_mem(golden), "allocscope trace " + c.fixture);
    const auto exact = clitest::run_cli({"trace", "--pytorch-total", clitest::snapshot_path(c.fixture)});
    ASSERT_EQ(exact.exit_code, 0) << exact.err;
    expect_same(exact.out, golden, "allocscope trace --pytorch-total " + c.fixture);
  } else {
    expect_same(r.out, golden, "allocscope " + verb_of(c.kind) + " " + c.fixture);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CliGolden, testing::ValuesIn(golden_cases()), case_name);

// Every fixture the goldens cover must be exercised (guards against a renamed or unreadable fixture).
TEST(GoldenCoverage, EveryGoldenFileHasAFixture) {
  const auto cases = golden_cases();
  EXPECT_GE(cases.size(), 35u);
  for (const auto& c : cases) EXPECT_TRUE(clitest::file_exists(clitest::snapshot_path(c.fixture))) << c.fixture;
}

}  // namespace
