// JSON snapshots: the dict torch.cuda.memory._snapshot() returns, written by Python's json.dump (tuples become lists,
// 2^64-1 stays an integer). Each must load to the model its pickle loads to, since the pickle's answers are the ones
// judged against PyTorch's own tools; Python writes the JSON here, not our code. Broken JSON is refused with the
// byte it broke at, and nothing hangs or crashes.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "allocscope/answers.h"
#include "allocscope/loader.h"
#include "fixtures.h"

namespace allocscope {
namespace {

std::vector<uint8_t> bytes_of(const std::string& text) { return {text.begin(), text.end()}; }

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

bool have_python() { return std::system("python3 -c 'import json, pickle, gzip' >/dev/null 2>&1") == 0; }

// A folder of this test's own, removed with what it holds.
class TempDir {
 public:
  TempDir() : path_(std::filesystem::path(::testing::TempDir()) / ("allocscope_json_" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string operator/(const std::string& leaf) const { return (path_ / leaf).string(); }

 private:
  std::filesystem::path path_;
};

// What a user's script does: json.dump of the unpickled snapshot (gzip-compressed when the output ends in .gz), for
// each (pickle, output) pair, in one Python process.
void write_json_with_python(const std::vector<std::pair<std::string, std::string>>& pairs, const std::string& list) {
  {
    std::ofstream f(list);
    for (const auto& [in, out] : pairs) f << in << "\t" << out << "\n";
  }
  const std::string cmd = "python3 -c \"import sys, json, pickle, gzip\n"
                          "for line in open(sys.argv[1]):\n"
                          "    p, o = line.rstrip('\\n').split('\\t')\n"
                          "    d = pickle.load(gzip.open(p) if p.endswith('.gz') else open(p, 'rb'))\n"
                          "    with (gzip.open(o, 'wt') if o.endswith('.gz') else open(o, 'w')) as f: json.dump(d, f)\" '" +
                          list + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

// The same model, past what the page and stream tests compare: per-event streams, segments' sizes, blocks, devices,
// the host's memory, and what the answers say from it.
void expect_same(const Snapshot& json, const Snapshot& pickle) {
  testing::expect_same_model(json, pickle);
  EXPECT_EQ(json.events.stream, pickle.events.stream);
  ASSERT_EQ(json.devices.size(), pickle.devices.size());
  for (size_t d = 0; d < json.devices.size(); ++d) {
    EXPECT_EQ(json.devices[d].begin, pickle.devices[d].begin);
    EXPECT_EQ(json.devices[d].end, pickle.devices[d].end);
  }
  for (size_t i = 0; i < std::min(json.segments.size(), pickle.segments.size()); ++i)
    EXPECT_EQ(json.segments[i].total_size, pickle.segments[i].total_size);
  ASSERT_EQ(json.blocks.size(), pickle.blocks.size());
  for (size_t i = 0; i < json.blocks.size(); ++i) {
    EXPECT_EQ(json.blocks[i].size, pickle.blocks[i].size);
    EXPECT_EQ(json.blocks[i].state, pickle.blocks[i].state);
    EXPECT_EQ(json.blocks[i].stack, pickle.blocks[i].stack);
  }
  for (size_t i = 0; i < std::min(json.frames.size(), pickle.frames.size()); ++i) {
    EXPECT_EQ(json.str(json.frames[i].filename), pickle.str(pickle.frames[i].filename));
    EXPECT_EQ(json.frames[i].line, pickle.frames[i].line);
    EXPECT_EQ(json.frames[i].line_unsigned, pickle.frames[i].line_unsigned);
  }
  EXPECT_EQ(json.host != nullptr, pickle.host != nullptr);
  if (json.host && pickle.host) EXPECT_EQ(json.host->events.size_rows(), pickle.host->events.size_rows());
}

// What the CLI would print for each answer on both loads.
void expect_same_answers(Snapshot json, Snapshot pickle) {
  json.source_bytes = pickle.source_bytes;  // the one number that differs: the file's size
  LoadedSnapshot a("snapshot", std::move(json)), b("snapshot", std::move(pickle));
  LoadedSnapshot* pa = &a;
  LoadedSnapshot* pb = &b;
  AnswerOptions options;
  options.items = {{"json", ""}};
  for (const char* verb : {"summary", "peak", "categories", "leaks"}) {
    SCOPED_TRACE(verb);
    auto x = answer(verb, std::span<LoadedSnapshot* const>(&pa, 1), options);
    auto y = answer(verb, std::span<LoadedSnapshot* const>(&pb, 1), options);
    ASSERT_EQ(x.ok(), y.ok());
    if (x.ok()) EXPECT_EQ(x->out, y->out);
  }
}

TEST(JsonSnapshot, EveryFixtureLoadsAsItsPickleDoes) {
  if (!have_python()) GTEST_SKIP() << "python3 not available";
  TempDir dir;
  auto files = testing::all_fixtures();
  files.push_back({"newest/pt214_training", "newest/pt214_training.pickle"});  // annotations, host memory, FX frames
  // 1M events: json.dump alone takes longer than the rest together. Under a sanitizer, only files whose JSON is
  // small: json.dump repeats every frame, so a 240 KB .gz becomes a 130 MB JSON (the default build reads them all).
  std::erase_if(files, [](const auto& f) {
    std::error_code ec;
    return f.first == "gpt2_big_1M" || (kSanitized && std::filesystem::file_size(testing::fixture(f.second), ec) > 60000);
  });
  std::vector<std::pair<std::string, std::string>> pairs;
  for (size_t i = 0; i < files.size(); ++i)
    pairs.push_back({testing::fixture(files[i].second), dir / (std::to_string(i) + ".json")});
  write_json_with_python(pairs, dir / "list.txt");
  for (size_t i = 0; i < files.size(); ++i) {
    SCOPED_TRACE(files[i].first);
    auto from_json = load_snapshot_file(pairs[i].second);
    ASSERT_TRUE(from_json.ok()) << from_json.error().describe();
    auto from_pickle = load_snapshot_file(pairs[i].first);
    ASSERT_TRUE(from_pickle.ok());
    expect_same(from_json.value(), from_pickle.value());
    EXPECT_EQ(from_json->warnings, from_pickle->warnings);
    std::remove(pairs[i].second.c_str());
    // And what the CLI prints from them, where the answers are quick (the models were compared above for all).
    std::error_code ec;
    if (std::filesystem::file_size(pairs[i].first, ec) <= 60000)
      expect_same_answers(std::move(from_json.value()), std::move(from_pickle.value()));
  }
  EXPECT_GE(files.size(), kSanitized ? 15u : 35u);
}

// Gzipped, streamed in odd chunks as the viewer feeds a file, and with a byte order mark: the same model.
TEST(JsonSnapshot, GzippedAndStreamedLoadTheSame) {
  if (!have_python()) GTEST_SKIP() << "python3 not available";
  TempDir dir;
  write_json_with_python({{testing::fixture("oom.pickle"), dir / "oom.json.gz"},
                          {testing::fixture("oom.pickle"), dir / "oom.json"}},
                         dir / "list.txt");
  auto pickle = load_snapshot_file(testing::fixture("oom.pickle"));
  ASSERT_TRUE(pickle.ok());
  auto gz = load_snapshot_file(dir / "oom.json.gz");
  ASSERT_TRUE(gz.ok()) << gz.error().describe();
  expect_same(gz.value(), pickle.value());

  auto text = read_file(dir / "oom.json");
  ASSERT_TRUE(text.ok());
  for (size_t chunk : {size_t{7}, size_t{1} << 16}) {
    SnapshotStream s({}, text->size());
    for (size_t at = 0; at < text->size(); at += chunk)
      ASSERT_TRUE(s.feed({text->data() + at, std::min(chunk, text->size() - at)}).ok());
    auto streamed = s.finish();
    ASSERT_TRUE(streamed.ok()) << streamed.error().describe();
    expect_same(streamed.value(), pickle.value());
  }
  std::vector<uint8_t> bom = {0xef, 0xbb, 0xbf, ' ', '\n'};
  bom.insert(bom.end(), text->begin(), text->end());
  auto with_bom = load_snapshot(bom);
  ASSERT_TRUE(with_bom.ok()) << with_bom.error().describe();
  expect_same(with_bom.value(), pickle.value());
}

// Read with the 2.0-era keys and the largest numbers PyTorch writes: a hand-written snapshot, checked value by value.
TEST(JsonSnapshot, ValuesArriveAsTheirPickleWould) {
  const std::string json = R"({"segments": [{"device": 0, "address": 139637976727552, "total_size": 2097152,
    "stream": 0, "segment_type": "large", "segment_pool_id": [0, 0], "allocated_size": 512, "active_size": 512,
    "requested_size": 500, "blocks": [{"address": 139637976727552, "size": 512, "requested_size": 500,
    "state": "active_allocated", "frames": [{"filename": "train.py", "line": 18446744073709551615, "name": "step"}]},
    {"address": 139637976728064, "size": 2096640, "requested_size": 0, "state": "inactive", "frames": []}]}],
    "device_traces": [[{"action": "segment_alloc", "addr": 139637976727552, "size": 2097152, "stream": 0,
    "time_us": 1700000000000001, "frames": []}, {"action": "alloc", "addr": 139637976727552, "size": 512,
    "stream": 0, "time_us": 1700000000000002, "frames": [{"filename": "train.py", "line": 18446744073709551615,
    "name": "step"}], "user_metadata": "caf\u00e9 \ud83d\ude00"}]],
    "allocator_settings": {"expandable_segments": false, "max_split_size": -1, "garbage_collection_threshold": 0.0,
    "an_unknown_setting": null}, "a_key_from_the_future": {"nested": [1, 2.5, true, null]}})";
  auto s = load_snapshot(bytes_of(json));
  ASSERT_TRUE(s.ok()) << s.error().describe();
  ASSERT_EQ(s->segments.size(), 1u);
  EXPECT_EQ(s->segments[0].address, 139637976727552u);
  ASSERT_EQ(s->blocks.size(), 2u);
  ASSERT_EQ(s->devices.size(), 1u);
  ASSERT_EQ(s->events.size_rows(), 2u);
  EXPECT_EQ(s->events.time_us[1], 1700000000000002);
  const Frame& f = s->frames[s->stack(s->events.stack[1])[0]];
  EXPECT_TRUE(f.line_unsigned);
  EXPECT_EQ(static_cast<uint64_t>(f.line), UINT64_MAX);
  EXPECT_EQ(s->str(f.filename), "train.py");
  EXPECT_EQ(s->str(s->events.user_metadata[1]), "caf\xc3\xa9 \xf0\x9f\x98\x80");  // escapes, surrogate pair: UTF-8
  bool unknown = false;
  for (const auto& [key, count] : s->unknown_keys) unknown |= key == "a_key_from_the_future";
  EXPECT_TRUE(unknown) << "an unknown key is kept and counted, never a reason to refuse";
}

Error load_error(const std::string& text) {
  auto r = load_snapshot(bytes_of(text));
  EXPECT_FALSE(r.ok()) << text.substr(0, 80);
  return r.ok() ? Error{} : r.error();
}

TEST(JsonSnapshot, BrokenJsonNamesTheByteItBrokeAt) {
  // Cut in the middle: the end is where it broke.
  const std::string whole = R"({"segments": [], "device_traces": [[{"action": "alloc", "addr": 1, "size": 512}]]})";
  Error cut = load_error(whole.substr(0, 60));
  EXPECT_TRUE(cut.in_json);
  EXPECT_LE(cut.offset, 60u);
  EXPECT_NE(cut.describe().find("of the JSON"), std::string::npos) << cut.describe();

  // A snapshot's key holding the wrong kind: the builder's error, placed in the JSON near where it happened.
  Error wrong = load_error(R"({"device_traces": [], "segments": 5})");
  EXPECT_TRUE(wrong.in_json);
  EXPECT_NE(wrong.message.find("segments"), std::string::npos) << wrong.describe();
  EXPECT_LE(wrong.offset, 40u);

  // A profiler trace is JSON, but not a snapshot: said so, with its keys.
  Error trace = load_error(R"({"schemaVersion": 1, "traceEvents": []})");
  EXPECT_EQ(trace.message.rfind("JSON, but not a memory snapshot", 0), 0u) << trace.describe();
  EXPECT_NE(trace.message.find("'traceEvents'"), std::string::npos);

  Error list = load_error("\n [1, 2]");
  EXPECT_EQ(list.message.rfind("JSON, but not a memory snapshot: it holds a list of int", 0), 0u) << list.describe();
  Error events = load_error(R"([{"name": "aten::mm", "ph": "X", "ts": 1, "dur": 2}])");  // a trace's event list
  EXPECT_TRUE(events.in_json);

  // An integer no snapshot holds, at the byte where it starts or just past it.
  const std::string big = R"({"segments": [], "device_traces": [[{"action": "alloc", "addr": 123456789012345678901234567890}]]})";
  Error past64 = load_error(big);
  EXPECT_TRUE(past64.in_json);
  const size_t number = big.find("1234567890123");
  EXPECT_GE(past64.offset, number - 2) << past64.describe();
  EXPECT_LE(past64.offset, number + 31) << past64.describe();

  Error trailing = load_error(R"({"segments": []} {"segments": []})");
  EXPECT_NE(trailing.message.find("after the JSON value"), std::string::npos) << trailing.describe();
  EXPECT_EQ(trailing.offset, 17u);

  Error utf8 = load_error("{\"segments\": [], \"x\": \"\xff\xfe\"}");
  EXPECT_TRUE(utf8.in_json);
}

TEST(JsonSnapshot, DeepNestingIsRefusedNotRecursed) {
  // A million open brackets: bounded by the pickle machine's depth, refused at once, no stack overflow.
  std::string deep = "{\"segments\": ";
  deep.append(1000000, '[');
  Error e = load_error(deep);
  EXPECT_TRUE(e.in_json);
  std::string nested = "{\"segments\": [], \"x\": ";
  for (int i = 0; i < 600; ++i) nested += "[";
  for (int i = 0; i < 600; ++i) nested += "]";
  nested += "}";
  Error d = load_error(nested);
  EXPECT_NE(d.message.find("nested deeper than"), std::string::npos) << d.describe();
}

}  // namespace
}  // namespace allocscope
