// Our `trace` TOTAL MEM is the net of alloc and free_completed bytes per device (PyTorch's is its loop index);
// checked on every fixture against an independent sum, plus the edge cases the fixtures lack.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "allocscope/memviz.h"
#include "synthetic.h"
#include "test_util.h"

namespace {

using allocscope::Action;
using allocscope::BlockState;
namespace mv = allocscope::memviz;

std::vector<std::string> total_values(const std::string& text) {
  std::vector<std::string> values;
  for (const std::string& line : clitest::lines(text))
    if (line.rfind("TOTAL MEM: ", 0) == 0) {
      // PyTorch glues the next device's header onto its TOTAL MEM line: keep the size only (it ends in 'B').
      const std::string v = line.substr(11);
      values.push_back(v.substr(0, v.find('B') + 1));
    }
  return values;
}

TEST(TraceTotal, IsNetAllocatedBytesOnEveryFixture) {
  int checked = 0;
  for (const std::string& name : clitest::fixture_names()) {
    if (!clitest::file_exists(clitest::expected_path(name, "trace.txt"))) continue;
    const auto& s = clitest::fixture(name);
    const auto values = total_values(mv::trace(s));
    std::vector<std::string> want;
    for (const auto& d : s.devices) {
      if (d.count() == 0) continue;
      int64_t net = 0;  // what PyTorch meant: += size on alloc, -= size when a free completes
      for (uint32_t row = d.begin; row < d.end; ++row) {
        if (s.events.action[row] == Action::kAlloc) net += static_cast<int64_t>(s.events.size[row]);
        if (s.events.action[row] == Action::kFreeCompleted) net -= static_cast<int64_t>(s.events.size[row]);
      }
      EXPECT_EQ(mv::trace_net_bytes(s, d), net) << name;
      want.push_back(mv::format_size(net));
    }
    EXPECT_EQ(values, want) << name;
    ++checked;
  }
  EXPECT_GE(checked, 9);
}

// Pins down what PyTorch's golden TOTAL MEM really is: the last event's index, plus its size for an alloc or
// minus it for a free_completed. This is why we do not reproduce it by default.
TEST(TraceTotal, PyTorchValueIsTheLoopIndex) {
  for (const std::string& name : clitest::fixture_names()) {
    const std::string golden_path = clitest::expected_path(name, "trace.txt");
    if (!clitest::file_exists(golden_path)) continue;
    const auto& s = clitest::fixture(name);
    std::vector<std::string> want;
    for (const auto& d : s.devices) {
      if (d.count() == 0) continue;
      const uint32_t last = d.end - 1;
      int64_t count = d.count() - 1;
      if (s.events.action[last] == Action::kAlloc) count += static_cast<int64_t>(s.events.size[last]);
      if (s.events.action[last] == Action::kFreeCompleted) count -= static_cast<int64_t>(s.events.size[last]);
      want.push_back(mv::format_size(count));
    }
    EXPECT_EQ(total_values(clitest::read_golden(golden_path)), want) << name;
  }
}

// Two devices with events: PyTorch glues "Device 1 ---" onto its TOTAL MEM line; ours ends the line.
TEST(TraceTotal, SeveralDevicesKeepTheirOwnLines) {
  clitest::SnapshotBuilder b;
  b.device();
  b.event(Action::kSegmentAlloc, 1 << 20, 2 << 20);
  b.event(Action::kAlloc, 1 << 20, 512);
  b.device();  // device 1: no events
  b.device();
  b.event(Action::kAlloc, 7, 1024);  // no segment: MEM[addr:size]
  b.event(Action::kFreeRequested, 7, 1024);
  b.event(Action::kFreeCompleted, 7, 1024);
  b.event(Action::kFreeCompleted, 99, 2048);  // allocated before the window: named by address
  const std::string ours = mv::trace(b.s);
  EXPECT_EQ(ours,
            "Device 0 ----------------\n2 entries\na = cudaMalloc(1048576, 2.0MiB)\nb = a[0:512.0B]\n"
            "TOTAL MEM: 512.0B\n"
            "Device 2 ----------------\n4 entries\na = MEM[7:1.0KiB]\ndel a # 1.0KiB\n"
            "# free completed for a 1.0KiB\n# free completed for 99 2.0KiB\nTOTAL MEM: -2.0KiB\n");
  mv::TraceOptions pytorch;
  pytorch.pytorch_total = true;
  const std::string theirs = mv::trace(b.s, pytorch);
  EXPECT_NE(theirs.find("TOTAL MEM: 513.0BDevice 2 ----------------\n"), std::string::npos) << theirs;
  EXPECT_EQ(theirs.substr(theirs.size() - 18), "TOTAL MEM: -2.0KiB") << "3 - 2048 bytes, no newline";
}

// Events PyTorch has no case for print as a Python dict, with repr() quoting.
TEST(TraceTotal, OtherEventsPrintAsPythonDicts) {
  clitest::SnapshotBuilder b;
  const auto st = b.stack({{"inner", "/x/it's.py", 3}, {"outer", "main.py", 1}});
  b.device();
  b.event(Action::kSegmentMap, 4096, 2097152, st, "N/A");
  b.event(Action::kOom, 12345, 1 << 30);
  b.event(Action::kSnapshot, 0, 2069229056);  // PyTorch writes no `frames` key for snapshot markers
  EXPECT_EQ(mv::trace(b.s),
            "Device 0 ----------------\n3 entries\n"
            "{'action': 'segment_map', 'addr': 4096, 'size': 2097152, 'stream': 0, 'time_us': 1001, "
            "'compile_context': 'N/A', 'user_metadata': '', 'frames': [{'name': 'inner', 'filename': "
            "\"/x/it's.py\", 'line': 3}, {'name': 'outer', 'filename': 'main.py', 'line': 1}]}\n"
            "raise OutOfMemoryError # 1.0GiB requested, 12.1KiB free in CUDA\n"
            "{'action': 'snapshot', 'addr': 0, 'size': 2069229056, 'stream': 0, 'time_us': 1003, "
            "'compile_context': 'N/A', 'user_metadata': ''}\n"
            "TOTAL MEM: 0.0B\n");
}

TEST(Format, SizesLikePython) {
  EXPECT_EQ(mv::format_size(int64_t{0}), "0.0B");
  EXPECT_EQ(mv::format_size(int64_t{1023}), "1023.0B");
  EXPECT_EQ(mv::format_size(int64_t{1024}), "1.0KiB");
  EXPECT_EQ(mv::format_size(int64_t{-1000000000}), "-953.7MiB");
  EXPECT_EQ(mv::format_size(int64_t{20} << 20), "20.0MiB");
  EXPECT_EQ(mv::format_size(uint64_t{1} << 63), "8.0EiB");
  EXPECT_EQ(mv::format_size(1e30), "827180.6YiB");
  EXPECT_EQ(mv::format_1f(0.25), "0.2");  // half-to-even on the exact binary value, like Python
  EXPECT_EQ(mv::format_1f(0.35), "0.3");  // 0.35 is 0.34999... in binary
}

TEST(Format, PythonRepr) {
  EXPECT_EQ(mv::py_repr(""), "''");
  EXPECT_EQ(mv::py_repr("it's"), "\"it's\"");
  EXPECT_EQ(mv::py_repr("a'b\"c"), "'a\\'b\"c'");
  EXPECT_EQ(mv::py_repr("tab\tnl\n\\ \x01\x7f"), "'tab\\tnl\\n\\\\ \\x01\\x7f'");
  EXPECT_EQ(mv::py_repr("caf\xc3\xa9 \xc2\xa0"), "'caf\xc3\xa9 \\xa0'");
  // Python's str.isprintable: a variation selector (U+E0100, Mn) is printed, a tag (U+E0001, Cf) escaped; a
  // differential test against _memory_viz.py found every one of U+E0100-U+E01EF escaped.
  EXPECT_EQ(mv::py_repr("vs\xf3\xa0\x84\x80x"), "'vs\xf3\xa0\x84\x80x'");
  EXPECT_EQ(mv::py_repr("t\xf3\xa0\x80\x81x"), "'t\\U000e0001x'");
  EXPECT_EQ(mv::py_repr("h\xf0\x93\x90\xb0x"), "'h\\U00013430x'");  // U+13430, Cf on every Python since 3.8
}

}  // namespace
