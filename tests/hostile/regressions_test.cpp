// Minimal reproducers of what the hostile tests and fuzzers found, kept as regression tests once fixed. A reproducer
// of a bug that is still open starts with KNOWN_BUG("known bug: ..."), which skips it (so the suite stays green until
// the fix lands) unless HOSTILE_RUN_KNOWN_BUGS=1; deleting that line turns it into a regression test.
// docs/reliability.md lists each with its input, symptom and fix.
#include <cmath>
#include <cstdlib>
#include <limits>

#include "hostile.h"
#include "allocscope/frame_filter.h"
#include "allocscope/lifetimes.h"
#include "allocscope/memviz.h"
#include "allocscope/peak.h"
#include "../cli/synthetic.h"

// Skips a reproducer of an open bug unless HOSTILE_RUN_KNOWN_BUGS is set (to check a fix, or to see the failure).
#define KNOWN_BUG(why)                                                          \
  do {                                                                          \
    if (!std::getenv("HOSTILE_RUN_KNOWN_BUGS")) GTEST_SKIP() << (why);          \
  } while (0)

namespace hostile {
namespace {

using allocscope::load_snapshot;
using allocscope::LoadOptions;

// {'device_traces': [[{'action': 'alloc', 'addr': 1, 'size': 2, <extra>}]]} built by hand.
template <typename Extra>
Bytes one_entry(Extra extra) {
  P p(2);
  p.dict().str("device_traces").list().list().dict().mark();
  p.str("action").str("alloc").str("addr").i(1).str("size").i(2);
  extra(p);
  p.setitems().append().append().setitem();
  return p.done();
}

// The model a load produced must be self-consistent: device ranges inside the event columns, block ranges inside
// the block table, every stack/frame/string id inside its table. The writer and every view index with these.
void expect_consistent(const allocscope::Snapshot& s) {
  const size_t rows = s.events.size_rows();
  EXPECT_EQ(s.events.addr.size(), rows);
  EXPECT_EQ(s.events.stack.size(), rows);
  for (const auto& d : s.devices) {
    EXPECT_LE(d.begin, d.end);
    EXPECT_LE(d.end, rows) << "device " << d.device << " names rows past the event columns";
  }
  for (const auto& seg : s.segments) EXPECT_LE(uint64_t{seg.first_block} + seg.num_blocks, s.blocks.size());
  for (size_t i = 0; i < rows; ++i) ASSERT_LT(s.events.stack[i], s.stacks.size());
}

// Fixed in b93c281 (1-8).
// 1. LONG_BINPUT may jump 2^20 slots past the memo's end each time, so ~256 puts of 5 bytes each grow the memo to
//    max_memo = 2^28 slots x 16 bytes = 4 GiB: a 1.3 KB file allocates 4 GiB with default limits.
TEST(Regressions, MemoGrowsByStepsPastTheFarCheck) {
  P p(2);
  p.none();
  for (uint32_t k = 1; k < 256; ++k) p.put(k << 20);
  Bytes in = p.done();
  Outcome o = load_metered(in);
  expect_good_error(o, in.size(), "stepping LONG_BINPUT");
  EXPECT_LT(o.peak_bytes, int64_t{64} << 20);
}

// 2. Two 'device_traces' keys in the top-level dict (legal in a pickle: SETITEMS just assigns twice): read_traces
//    runs twice; the second gathers rows through indices into columns the first already gathered.
TEST(Regressions, DuplicateDeviceTracesKey) {
  for (int order = 0; order < 2; ++order) {
    P p(2);
    p.dict().mark();
    auto entry_list = [&] {
      p.list().list().dict().mark().str("action").str("alloc").str("addr").i(1).str("size").i(2);
      p.setitems().append().append();
    };
    p.str("device_traces");
    if (order == 0) entry_list(); else p.list();
    p.str("device_traces");
    if (order == 0) p.list(); else entry_list();
    p.setitems();
    Bytes in = p.done();
    Outcome o = load_metered(in);
    expect_good_error(o, in.size(), "duplicate device_traces");
    auto r = load_snapshot(in);
    if (r.ok()) {
      expect_consistent(r.value());
      auto again = load_snapshot(allocscope::write_snapshot(r.value()));
      EXPECT_TRUE(again.ok());
    }
  }
}

// 3. A list referenced many times through the memo is expanded at every reference: device_traces = [L] * N with L
//    holding M trace entries makes N*M rows from a file of size O(N + M).
TEST(Regressions, SharedTraceListIsExpandedPerReference) {
  const uint32_t n = 3000, m = 3000;
  P p(2);
  p.dict().str("device_traces").list().mark();
  p.list().put(0).mark();
  for (uint32_t i = 0; i < m; ++i) p.dict().mark().str("action").str("alloc").str("size").i(i).setitems();
  p.appends();
  for (uint32_t i = 1; i < n; ++i) p.get(0);
  p.appends().setitem();
  Bytes in = p.done();
  Outcome o = load_metered(in, {}, int64_t{256} << 20);
  expect_good_error(o, in.size(), "shared trace list");
  EXPECT_FALSE(o.ok) << "a shared container must be refused, not expanded";
}

// 4. The same for blocks: segments = [S] * N with S = {'blocks': [M blocks]}.
TEST(Regressions, SharedBlocksAreExpandedPerReference) {
  const uint32_t n = 3000, m = 3000;
  P p(2);
  p.dict().str("segments").list().mark();
  p.dict().put(0).str("blocks").list().mark();
  for (uint32_t i = 0; i < m; ++i) p.dict().str("size").i(i).setitem();
  p.appends().setitem();
  for (uint32_t i = 1; i < n; ++i) p.get(0);
  p.appends().setitem();
  Bytes in = p.done();
  Outcome o = load_metered(in, {}, int64_t{256} << 20);
  expect_good_error(o, in.size(), "shared blocks");
  EXPECT_FALSE(o.ok) << "a shared container must be refused, not expanded";
}

// 5. allocator_settings is converted recursively (depth < 16) without noticing shared sub-objects: X0 = [1],
//    X(k+1) = [Xk] * 10 gives 10^15 Setting nodes from a ~700-byte file.
TEST(Regressions, SharedSettingsExpandExponentially) {
  P p(2);
  p.dict().str("allocator_settings").dict().str("x");
  p.list().i(1).append().put(0).op('0');
  for (uint32_t k = 1; k < 16; ++k) {
    p.list().mark();
    for (int j = 0; j < 10; ++j) p.get(k - 1);
    p.appends().put(k);
    if (k < 15) p.op('0');  // keep only the last one on the stack
  }
  p.setitem().setitem();
  Bytes in = p.done();
  Outcome o = load_metered(in);
  expect_good_error(o, in.size(), "shared settings DAG");
}

// 6. A dict that is not a frame and has no 'action' is offered to the consumer again at every insertion, and each
//    offer searches the whole dict for 'action': [D] * M with D of N items costs N*M.
TEST(Regressions, SharedDictIsSearchedAtEveryInsertion) {
  const uint32_t n = 200000, m = 200000;
  P p(2);
  p.list().dict().put(0).mark();
  for (uint32_t i = 0; i < n; ++i) p.none().none();
  p.setitems();
  p.append();
  for (uint32_t j = 0; j < m; j += 1000) {
    p.mark();
    for (uint32_t i = 0; i < 1000; ++i) p.op('h').u8(0);
    p.appends();
  }
  Bytes in = p.done();
  Outcome o = load_metered(in, {}, int64_t{256} << 20);
  expect_good_error(o, in.size(), "shared dict");
}

// 7. Frames are indexed by (name << 32) ^ filename ^ (line << 17); distinct frames with equal keys fall back to a
//    linear scan of all frames, so N crafted frames cost N^2/2 comparisons. Frame j below has name id 30 + j
//    (ids 1-28 are the loader's keys, 29 is the filename) and line (30 + j) << 15, so every key equals 29.
TEST(Regressions, CollidingFrameKeysScanLinearly) {
  const uint32_t n = 200000;
  P p(2);
  p.str("name").put(0).str("filename").put(1).str("line").put(2).str("F").put(3);
  p.op('0').op('0').op('0').op('0');  // the strings are interned and memoized; drop them
  p.list().mark();
  for (uint32_t j = 0; j < n; ++j) {
    p.dict().mark().get(0).str("f" + std::to_string(j)).get(1).get(3).get(2).i(int64_t{30 + j} << 15).setitems();
  }
  p.appends();
  Bytes in = p.done();
  Outcome o = load_metered(in, {}, int64_t{256} << 20);
  expect_good_error(o, in.size(), "colliding frames");
}

// 8. time_us as a float is cast to int64 without a range check: 1e300, inf and NaN are undefined behaviour (UBSan
//    float-cast-overflow, reported by clang builds such as the fuzz preset).
TEST(Regressions, FloatTimeOutOfRange) {
  for (double t : {1e300, -1e300, std::numeric_limits<double>::infinity(), std::nan("")}) {
    Bytes in = one_entry([&](P& p) { p.str("time_us").f(t); });
    Outcome o = load_metered(in);
    expect_good_error(o, in.size(), "float time_us");
    EXPECT_FALSE(o.ok) << "time_us " << t << " is not a time";
    P a(2);
    a.dict().str("external_annotations").list().dict().mark().str("stage").str("START").str("time_us").f(t);
    a.setitems().append().setitem();
    Bytes ain = a.done();
    Outcome oa = load_metered(ain);
    expect_good_error(oa, ain.size(), "float annotation time_us");
    EXPECT_FALSE(oa.ok) << "annotation time_us " << t << " is not a time";
  }
}

// Fixed in e13a6de (9-10).
// 9. allocator_settings are copied into Setting trees, and to_setting copies every str it meets (builder_tree.cpp:213
//    s.s = std::string(r.str(v)), :223 c.key = ...): a 1 MB string stored once and referenced 20,000 times through
//    the memo as keys and values is 20 GB of copies from a 1.1 MB file (kMaxSettingNodes bounds nodes, not bytes).
TEST(Regressions, SharedStringsInSettingsAreCopiedPerReference) {
  P p(2);
  p.dict().str("allocator_settings").dict().mark();
  p.str(std::string(1 << 20, 'x')).put(0).op('0');
  p.str("k").get(0);
  for (int i = 1; i < 10000; ++i) p.get(0).get(0);  // keys and values: the same 1 MB string
  p.setitems().setitem();
  Bytes in = p.done();
  Outcome o = load_metered(in, {}, int64_t{256} << 20);
  expect_good_error(o, in.size(), "shared 1 MB string in settings");
  EXPECT_LT(o.peak_bytes, int64_t{64} << 20);
}

// 10. Past kMaxSettingNodes, to_setting returns a "..." Setting at once, but the parent loop (builder_tree.cpp:228)
//     still pushes one Setting (~110 bytes) per item: a settings list of 1M Nones (1 MB file) peaks at 227 MB.
TEST(Regressions, LongSettingsListMakesASettingPerItem) {
  P p(2);
  p.dict().str("allocator_settings").dict().str("x").list().mark().repeat("N", 1 << 20).appends().setitem().setitem();
  Bytes in = p.done();
  Outcome o = load_metered(in, {}, int64_t{512} << 20);
  expect_good_error(o, in.size(), "long settings list");
  EXPECT_LT(o.peak_bytes, int64_t{64} << 20);
}

// 14. SnapshotStream::finish() on a pickle without STOP runs the machine over an empty final span: step() computes
//     begin_ + (4u << 20) with begin_ == nullptr (dispatch.cpp:11), undefined behaviour that aborts UBSan builds
//     (found by fuzz_stream on its 25,744th input; minimal: feed "\x80\x02N", then finish()). clang's UBSan
//     (fuzz preset) reports it; gcc's (asan preset) does not, so under gcc this test passes even with the bug.
TEST(Regressions, StreamFinishWithoutStop) {
  for (const char* text : {"\x80\x02N", "\x80\x02", "(", "\x80\x04N"}) {
    allocscope::SnapshotStream stream;
    const std::string s(text);
    EXPECT_TRUE(stream.feed(Bytes(s.begin(), s.end())).ok());
    auto r = stream.finish();
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("STOP"), std::string::npos) << r.error().describe();
  }
}

// 15-17. Files CPython's pickle loads that the loader mishandled (an audit, 2026-11-26; written by
//     tests/fixtures/generators/gen_hostile_valid.py into tests/fixtures/hostile_valid):
//     - an unknown key whose value is one list shared by every entry: recycling the first entry freed the list and
//       cleared its memo slot, so the second entry's BINGET was refused as "never stored";
//     - an 'action' key added to a segment or a block turned it into a trace row: "0 segments", with no warning;
//     - a frame name with a lone surrogate made `timeline --json` and `state --json` abort (tested in the CLI tests).
TEST(Regressions, ValidPicklesTheLoaderMishandled) {
  for (const char* name : {"shared_unknown_list", "segment_actionkey", "block_actionkey", "surrogate_frame"}) {
    auto r = allocscope::load_snapshot_file(std::string(ALLOCSCOPE_FIXTURES) + "/hostile_valid/" + name + ".pickle");
    ASSERT_TRUE(r.ok()) << name << ": " << r.error().describe();
    const allocscope::Snapshot& s = r.value();
    EXPECT_EQ(s.segments.size(), 1u) << name;
    EXPECT_EQ(s.blocks.size(), 2u) << name;
    EXPECT_EQ(s.events.size_rows(), 5u) << name;
  }
  // Dicts with an 'action' outside device_traces are no events, with device_traces or without (without, they were
  // put on device 0: "1 events"), and a warning says they were left out.
  for (const auto& [name, rows] : std::vector<std::pair<const char*, size_t>>{{"action_dicts_outside_traces", 5u},
                                                                              {"action_dicts_without_traces", 0u}}) {
    auto r = allocscope::load_snapshot_file(std::string(ALLOCSCOPE_FIXTURES) + "/hostile_valid/" + name + ".pickle");
    ASSERT_TRUE(r.ok()) << name << ": " << r.error().describe();
    EXPECT_EQ(r->events.size_rows(), rows) << name;
    EXPECT_EQ(r->segments.size(), 1u) << name;
    bool said = false;
    for (const std::string& w : r->warnings) said = said || w.find("2 dict(s) with an 'action' key") != std::string::npos;
    EXPECT_TRUE(said) << name;
  }
  // Types PyTorch never writes, in fields its tools never read or only print (a frame without an int line, None
  // for a segment's pool, type, flag or device, tuples for lists, None for a device's trace): loaded and said, where
  // the file was refused whole. Their drop-in outputs are PyTorch's (hostile_valid/expected, the golden suite).
  for (const auto& [name, said] : std::vector<std::pair<const char*, const char*>>{
           {"frames_without_line", "frame(s) have no int 'line'"},
           {"segment_fields_none", "segment 'segment_pool_id' not a tuple of ints"},
           {"tuples_and_none_trace", ""}}) {
    auto r = allocscope::load_snapshot_file(std::string(ALLOCSCOPE_FIXTURES) + "/hostile_valid/" + name + ".pickle");
    ASSERT_TRUE(r.ok()) << name << ": " << r.error().describe();
    EXPECT_EQ(r->segments.size(), 1u) << name;
    EXPECT_EQ(r->events.size_rows(), 5u) << name;
    bool found = std::string_view(said).empty();
    for (const std::string& w : r->warnings) found = found || w.find(said) != std::string::npos;
    EXPECT_TRUE(found) << name << ": no warning with \"" << said << "\"";
  }
}

// 18. Every per-device answer walks the file's segments: 100,000 devices of one segment each (a 1.3 MB file) made
//     `summary` run for minutes. PyTorch numbers a process's GPUs with an int8 (c10::DeviceIndex), so a segment or a
//     trace beyond ordinal 127 is refused, naming where.
TEST(Regressions, DeviceOrdinalsBeyondAProcessAreRefused) {
  {
    clitest::SnapshotBuilder b;
    b.segment(0x100000000, 0, 2 << 20, {{2 << 20, 2 << 20, allocscope::BlockState::kActiveAllocated, 0}});
    b.s.segments.back().device = 128;
    auto r = load_snapshot(allocscope::write_snapshot(b.s));
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("segment 'device' is 128"), std::string::npos) << r.error().describe();
    EXPECT_NE(r.error().offset, allocscope::Error::kNoOffset);
  }
  {
    clitest::SnapshotBuilder b;
    for (int d = 0; d <= 128; ++d) b.device();
    b.event(allocscope::Action::kAlloc, 0x1000, 512);
    auto r = load_snapshot(allocscope::write_snapshot(b.s));
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("device 128"), std::string::npos) << r.error().describe();
  }
  {  // ordinal 127 is a device like any other
    clitest::SnapshotBuilder b;
    for (int d = 0; d <= 127; ++d) b.device();
    b.event(allocscope::Action::kAlloc, 0x1000, 512);
    EXPECT_TRUE(load_snapshot(allocscope::write_snapshot(b.s)).ok());
  }
}

// 19. The flame tree walked each live row's stack: 50,000 allocations sharing one 200,000-frame stack (a small
//     file: the stack is one memoized list) was 10^10 steps. Rows sharing a stack now walk it once; under the
//     suite's 300 s timeout the old walk could not finish.
TEST(Regressions, RowsSharingADeepStackWalkItOnce) {
  clitest::SnapshotBuilder b;
  std::vector<std::tuple<std::string, std::string, int64_t>> frames;
  for (int k = 0; k < 200000; ++k) frames.emplace_back("f", "model.py", k % 50);
  const allocscope::StackId st = b.stack(frames);
  b.device();
  for (uint64_t k = 0; k < 50000; ++k) b.event(allocscope::Action::kAlloc, 0x100000 + k * 512, 512, st);
  const allocscope::Lifetimes lts = allocscope::build_lifetimes(b.s);
  ASSERT_EQ(lts.devices.size(), 1u);
  const allocscope::DeviceLifetimes& lt = lts.devices[0];
  std::vector<uint32_t> rows(lt.count());
  for (uint32_t i = 0; i < lt.count(); ++i) rows[i] = i;
  const allocscope::FrameFilter ff(b.s);
  const allocscope::FlameTree t = allocscope::flame_tree(b.s, lt, ff, rows);
  ASSERT_FALSE(t.total_bytes.empty());
  EXPECT_EQ(t.total_bytes[0], 50000ull * 512);
  EXPECT_EQ(t.count[0], 50000u);
}

}  // namespace
}  // namespace hostile

// 27. `stats` draws a character per 20 MiB page of each segment: 20 segments claiming 2^50 bytes (a 2.9 KB file)
//     asked for 1 GB of bars and 1.8 GB of memory. A bar stops at 2^20 pages (20 TiB, past any GPU) and says so.
TEST(Regressions, StatsBarsOfImpossiblyLargeSegmentsAreCut) {
  clitest::SnapshotBuilder b;
  for (uint64_t k = 1; k <= 20; ++k)
    b.segment(k << 52, 0, uint64_t{1} << 50,
              {{uint64_t{1} << 50, uint64_t{1} << 50, allocscope::BlockState::kActiveAllocated, 0}});
  b.device();
  auto r = allocscope::load_snapshot(allocscope::write_snapshot(b.s));
  ASSERT_TRUE(r.ok()) << r.error().describe();
  const std::string out = allocscope::memviz::stats(r.value());
  EXPECT_LT(out.size(), size_t{32} << 20);
  EXPECT_NE(out.find("more pages, past any GPU's memory)] 1.0PiB allocated"), std::string::npos) << out.substr(0, 200);
}

