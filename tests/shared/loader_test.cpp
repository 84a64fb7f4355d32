// The loader against every real fixture: counts must equal expected/NAME.facts.json (computed by Python from the
// same files).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "allocscope/loader.h"
#include "fixtures.h"

namespace allocscope {
namespace {

class FactsTest : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(FactsTest, CountsEqualPythonFacts) {
  const auto& [base, file] = GetParam();
  std::ifstream f(testing::expected_file(base, "facts.json"));
  ASSERT_TRUE(f) << base;
  const nlohmann::json facts = nlohmann::json::parse(f);

  auto r = load_snapshot_file(testing::fixture(file));
  ASSERT_TRUE(r.ok()) << r.error().describe();
  const Snapshot& s = r.value();

  EXPECT_EQ(s.segments.size(), facts["segments"].get<size_t>());
  uint64_t reserved = 0, requested = 0;
  for (const Segment& seg : s.segments) reserved += seg.total_size;
  // facts count the requested bytes of active_allocated blocks (not the segments' requested_size, which differs
  // for blocks pending free and in files not written by PyTorch).
  for (const Block& b : s.blocks) requested += b.state == BlockState::kActiveAllocated ? b.requested_size : 0;
  EXPECT_EQ(reserved, facts["total_reserved"].get<uint64_t>());
  EXPECT_EQ(requested, facts["total_allocated"].get<uint64_t>());

  size_t active = 0;
  for (const Block& b : s.blocks) active += b.state == BlockState::kActiveAllocated;
  EXPECT_EQ(active, facts["active_blocks"].get<size_t>());

  const auto& per_device = facts["trace_events_per_device"];
  ASSERT_EQ(s.devices.size(), per_device.size());
  for (size_t d = 0; d < s.devices.size(); ++d) EXPECT_EQ(s.devices[d].count(), per_device[d].get<uint32_t>());

  std::map<std::string, uint64_t> actions;
  for (Action a : s.events.action) ++actions[std::string(action_name(a))];
  std::map<std::string, uint64_t> expected;
  for (auto& [k, v] : facts["actions"].items()) expected[k] = v.get<uint64_t>();
  EXPECT_EQ(actions, expected);
  EXPECT_TRUE(s.unknown_action_names.empty());
}

INSTANTIATE_TEST_SUITE_P(AllFixtures, FactsTest, ::testing::ValuesIn(testing::all_fixtures()),
                         [](const auto& info) {
                           std::string n = info.param.first;
                           std::replace(n.begin(), n.end(), '/', '_');
                           return n;
                         });

TEST(Loader, FramesAndStacksAreInterned) {
  auto r = load_snapshot_file(testing::fixture("gpt2_big_1M.pickle.gz"));
  ASSERT_TRUE(r.ok()) << r.error().describe();
  const Snapshot& s = r.value();
  // 36M frame references in the file are a few hundred distinct frames and stacks.
  EXPECT_LT(s.frames.size(), 1000u);
  EXPECT_LT(s.stacks.size(), 1000u);
  uint64_t refs = 0;
  for (StackId id : s.events.stack) refs += s.stack(id).size();
  EXPECT_GT(refs, 30'000'000u);
  EXPECT_LE(s.events.memory_bytes() / s.events.size_rows(), 64u);
}

TEST(Loader, KeepsFieldsOfAnEntry) {
  auto r = load_snapshot_file(testing::fixture("oom.pickle"));
  ASSERT_TRUE(r.ok()) << r.error().describe();
  const Snapshot& s = r.value();
  // The first entry, as Python's pickle.load shows it.
  ASSERT_GT(s.events.size_rows(), 0u);
  EXPECT_EQ(s.events.action[0], Action::kSegmentAlloc);
  EXPECT_EQ(s.events.addr[0], 140207261220864u);
  EXPECT_EQ(s.events.size[0], 9382658048u);
  EXPECT_EQ(s.events.time_us[0], 1795308401820458);
  EXPECT_EQ(s.str(s.events.compile_context[0]), "N/A");
  auto st = s.stack(s.events.stack[0]);
  ASSERT_EQ(st.size(), 3u);
  EXPECT_EQ(s.str(s.frames[st[0]].name), "oom_case");
  EXPECT_EQ(s.frames[st[0]].line, 98);
  EXPECT_EQ(s.str(s.frames[st[2]].name), "<module>");
  // The oom entry stores device_free in the addr column.
  bool found = false;
  for (size_t i = 0; i < s.events.size_rows(); ++i) {
    if (s.events.action[i] != Action::kOom) continue;
    found = true;
    EXPECT_EQ(s.events.addr[i], 8492548096u);
    EXPECT_EQ(s.events.size[i], 9381867520u);
  }
  EXPECT_TRUE(found);
  // Allocator settings are kept, nested dicts included.
  bool saw_roundup = false;
  for (const Setting& st2 : s.allocator_settings)
    if (st2.key == "roundup_power2_divisions") saw_roundup = st2.kind == Setting::Kind::kDict && st2.children.size() == 16;
  EXPECT_TRUE(saw_roundup);
}

TEST(Loader, GzipAndRawGiveTheSameModel) {
  auto raw = read_file(testing::fixture("gpt2_cpp.pickle.gz"));
  ASSERT_TRUE(raw.ok());
  auto inflated = gunzip(raw.value());
  ASSERT_TRUE(inflated.ok()) << inflated.error().describe();
  auto a = load_snapshot(raw.value());
  auto b = load_snapshot(inflated.value());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->events.addr, b->events.addr);
  EXPECT_EQ(a->events.stack, b->events.stack);
  EXPECT_EQ(a->source_bytes, inflated->size());
}

TEST(Loader, ProgressIsReported) {
  LoadOptions o;
  uint64_t last = 0, calls = 0;
  o.progress = [&](std::string_view phase, uint64_t done, uint64_t total) {
    if (phase == "parse") last = done, ++calls;
    EXPECT_LE(done, total);
  };
  auto r = load_snapshot_file(testing::fixture("resnet50_train.pickle"), o);
  ASSERT_TRUE(r.ok());
  EXPECT_GE(calls, 1u);
  EXPECT_EQ(last, r->source_bytes);
}

TEST(Loader, CppFramesKeepUnknownFilenames) {
  auto r = load_snapshot_file(testing::fixture("gpt2_cpp.pickle.gz"));
  ASSERT_TRUE(r.ok()) << r.error().describe();
  size_t cpp = 0;
  for (const Frame& f : r->frames) cpp += r->str(f.filename) == "??" && f.line == 0;
  EXPECT_GT(cpp, 10u);
}


// PyTorch 2.0 blocks carry 'history' (the allocations the block held, newest first) instead of 'address' and
// 'frames'. The address is where the block sits in its segment; the stack is its newest history entry's.
TEST(Loader, PyTorch20BlocksGetAddressesAndStacksFromHistory) {
  auto r = load_snapshot_file(testing::fixture("external/pt20_opt13b.pickle.gz"));
  ASSERT_TRUE(r.ok()) << r.error().describe();
  const Snapshot& s = *r;
  ASSERT_FALSE(s.segments.empty());
  size_t with_history = 0;
  for (const Segment& seg : s.segments) {
    uint64_t at = seg.address;
    for (const Block& b : s.blocks_of(seg)) {
      EXPECT_EQ(b.address, at);
      at += b.size;
      EXPECT_FALSE(b.has_frames);
      with_history += b.has_history;
      if (b.num_history > 0) {
        EXPECT_EQ(b.stack, s.history_of(b)[0].stack);
      }
    }
    EXPECT_EQ(at, seg.address + seg.total_size);
  }
  EXPECT_GT(with_history, 0u);
  // The first block, as Python's pickle.load shows it.
  const Block& b = s.blocks[s.segments[0].first_block];
  EXPECT_EQ(b.requested_size, 205914112u);
  ASSERT_EQ(b.num_history, 1u);
  EXPECT_EQ(s.history_of(b)[0].real_size, 205914112u);
  EXPECT_EQ(s.str(s.frames[s.stack(b.stack)[0]].name), "opt_output_embed");
  EXPECT_EQ(s.frames[s.stack(b.stack)[0]].line, 283);
}

// Which keys an entry had, in file order, is kept: PyTorch prints entries it does not format as their dict.
TEST(Loader, EntriesKeepTheirKeysInFileOrder) {
  auto r = load_snapshot_file(testing::fixture("external/pt22_eor_nn.pickle.gz"));
  ASSERT_TRUE(r.ok()) << r.error().describe();
  const Snapshot& s = *r;
  size_t snapshots = 0;
  for (size_t row = 0; row < s.events.size_rows(); ++row) {
    const EntryLayout* layout = s.layout_of(row);
    ASSERT_NE(layout, nullptr);
    if (s.events.action[row] != Action::kSnapshot) continue;
    ++snapshots;
    EXPECT_EQ(*layout, (EntryLayout{EntryKey::kAction, EntryKey::kAddr, EntryKey::kSize, EntryKey::kStream,
                                    EntryKey::kTimeUs}));
  }
  EXPECT_EQ(snapshots, 9u);
}

// torch.compile's fake frames have line 2^64-1, above int64: kept exactly (this file failed to load before).
TEST(Loader, FrameLinesAbove2To63AreKept) {
  auto r = load_snapshot_file(testing::fixture("external/pt26_cs336_compile_fwd.pickle.gz"));
  ASSERT_TRUE(r.ok()) << r.error().describe();
  size_t huge = 0;
  for (const Frame& f : r->frames) huge += f.line_unsigned && line_text(f) == "18446744073709551615";
  EXPECT_GT(huge, 0u);
}

// Every shape CPython's pickler gives a list holds its own entries (tests/fixtures/pickler_layouts, written by
// Python's pickle with protocols 2 and 4; gen_pickler_layouts.py). A one-entry trace is `EMPTY_LIST entry APPEND`
// with no MARK of its own, inside device_traces' batch: offering that entry as if it were device_traces' own item
// once sent it to the wrong list, and the file failed to load. The same snapshots in the layout of PyTorch's C++
// pickler (_cpp) memoize each entry after its items ("SETITEMS BINPUT"), after the loader has already counted the
// entry into its list: that failed too ("expected a value to memoize, found a MARK"). Entry i of device d has addr
// d * 1,000,000 + i.
TEST(Loader, EveryListShapeCPythonWrites) {
  const std::map<std::string, std::vector<uint32_t>> layouts = {
      {"one_entry_first", {1, 3}}, {"one_entry_last", {3, 1}}, {"one_entry_each", {1, 1, 1}},
      {"batch_plus_one", {1001, 2}}};
  for (const auto& [name, counts] : layouts) {
    for (const char* proto : {"_p2", "_p4", "_cpp"}) {
      const std::string file = "pickler_layouts/" + name + proto + ".pickle";
      auto r = load_snapshot_file(testing::fixture(file));
      ASSERT_TRUE(r.ok()) << file << ": " << r.error().describe();
      const Snapshot& s = *r;
      ASSERT_EQ(s.devices.size(), counts.size()) << file;
      for (size_t d = 0; d < counts.size(); ++d) {
        ASSERT_EQ(s.devices[d].count(), counts[d]) << file << " device " << d;
        for (uint32_t i = 0; i < counts[d]; ++i) {
          const uint32_t row = s.devices[d].begin + i;
          EXPECT_EQ(s.events.addr[row], d * 1000000 + i) << file << " device " << d << " entry " << i;
          EXPECT_EQ(s.events.size[row], 512u * (i + 1)) << file;
          EXPECT_EQ(s.events.action[row], i % 2 ? Action::kFreeCompleted : Action::kAlloc) << file;
          ASSERT_EQ(s.stack(s.events.stack[row]).size(), 5u) << file;
          EXPECT_EQ(s.str(s.frames[s.stack(s.events.stack[row])[0]].name), i % 2 ? "train_step" : "forward") << file;
        }
      }
    }
  }
}

}  // namespace
}  // namespace allocscope
