// Repeated runs of memo references (every frame list of a snapshot): the reader decodes a run it has seen before from
// a cache and reuses the consumer's answer for it. These tests pin down that the shortcut never changes a result.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "allocscope/loader.h"
#include "allocscope/pickle.h"

namespace allocscope {
namespace {

using pickle::Tag;
using pickle::Value;

// Hand-assembled protocol-2 pieces.
std::string str(std::string_view s) {  // SHORT_BINUNICODE
  return std::string("\x8c") + static_cast<char>(s.size()) + std::string(s);
}
std::string put(int slot) { return std::string("q") + static_cast<char>(slot); }  // BINPUT
std::string get(int slot) { return std::string("h") + static_cast<char>(slot); }  // BINGET
// A list filled by "MARK BINGET 0..4 APPENDS": ten bytes of references, long enough to be cached.
std::string run_list() { return "](" + get(0) + get(1) + get(2) + get(3) + get(4) + "e"; }
// The five memoized strings a..e, left on the stack inside a MARK that the caller closes.
std::string five_strings() {
  std::string s;
  for (int i = 0; i < 5; ++i) s += str(std::string(1, static_cast<char>('a' + i))) + put(i);
  return s;
}

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }

std::string text_items(const pickle::Reader& r, const Value& list) {
  std::string out;
  for (const Value& v : r.items(list)) out += v.tag == Tag::kStr ? std::string(r.str(v)) : "?";
  return out;
}

// A dict {'s': ['a'..'e'], 'x': <run>, ...more pairs}, parsed whole; field(k) is the list under k as text.
struct ParsedDict {
  StringTable strings;
  pickle::Reader r{&strings};
  Result<Value> root = Error{"not run"};
  std::string field(std::string_view k) { return text_items(r, *r.find(root.value(), strings.intern(k))); }
};
std::unique_ptr<ParsedDict> parse_dict(const std::string& more_pairs) {
  auto d = std::make_unique<ParsedDict>();
  const std::string p =
      "\x80\x02}(" + str("s") + "](" + five_strings() + "e" + str("x") + run_list() + more_pairs + "u.";
  d->root = d->r.run(bytes(p));
  return d;
}

TEST(MemoRuns, OverwrittenMemoSlotIsDecodedAgainNotTakenFromTheCache) {
  // {'s': ['a'..'e'], 'x': <run>, 'y': <same run>, 'z': <same run after slot 0 was overwritten with 'Q'>}
  const auto d = parse_dict(str("y") + run_list() + str("z") + str("Q") + put(0) + "0" + run_list());
  ASSERT_TRUE(d->root.ok()) << d->root.error().describe();
  EXPECT_EQ(d->field("x"), "abcde");
  EXPECT_EQ(d->field("y"), "abcde");
  EXPECT_EQ(d->field("z"), "Qbcde");
}

TEST(MemoRuns, ListFilledFromTheCacheCanStillGrow) {
  // {'s': ['a'..'e'], 'x': <run>, 'y': <run> + APPEND 'f', 'z': <run> + <run>}: the cached values are copied into the
  // list before anything is added to it.
  const std::string refs = get(0) + get(1) + get(2) + get(3) + get(4);
  const auto d = parse_dict(str("y") + run_list() + str("f") + "a" + str("z") + run_list() + "(" + refs + "e");
  ASSERT_TRUE(d->root.ok()) << d->root.error().describe();
  EXPECT_EQ(d->field("x"), "abcde");
  EXPECT_EQ(d->field("y"), "abcdef");
  EXPECT_EQ(d->field("z"), "abcdeabcde");
}

// Turns a list under the key "frames" into a handle whose id sums its items' string ids; counts how often it runs.
class FramesConsumer : public pickle::Consumer {
 public:
  explicit FramesConsumer(StringTable* s) : frames_(s->intern("frames")) {}
  Result<bool> consume(const pickle::Reader& r, const Value& c, const Value* key, Value* out) override {
    if (c.tag != Tag::kList || !key || key->tag != Tag::kStr) return false;
    ++calls_on_lists;
    if (key->payload != frames_) return false;
    uint64_t sum = 0;
    for (const Value& v : r.items(c)) sum += v.payload;
    *out = Value::handle(7, sum);
    return true;
  }
  int calls_on_lists = 0;

 private:
  uint64_t frames_;
};

TEST(MemoRuns, ConsumerAnswerIsReusedOnlyForTheSameKey) {
  // [['a'..'e'], [{'frames': <run>}, {'frames': <same run>}, {'other': <same run>}]]
  std::string entries;  // built with += (GCC 12 warns falsely on "literal" + std::string chains here)
  for (const std::string& key : {str("frames") + put(5), get(5), str("other")}) {
    entries += '}';
    entries += key;
    entries += run_list();
    entries += 's';
  }
  const std::string p = "\x80\x02](](" + five_strings() + "e](" + entries + "ee.";
  StringTable strings;
  pickle::Reader r(&strings);
  FramesConsumer consumer(&strings);
  auto root = r.run(bytes(p), &consumer);
  ASSERT_TRUE(root.ok()) << root.error().describe();
  auto outer = r.items(root.value());
  ASSERT_EQ(outer.size(), 2u);
  auto dicts = r.items(outer[1]);
  ASSERT_EQ(dicts.size(), 3u);
  uint64_t expected = 0;
  for (char c = 'a'; c <= 'e'; ++c) expected += strings.intern(std::string(1, c));
  const Value first = *r.find(dicts[0], strings.intern("frames"));
  const Value second = *r.find(dicts[1], strings.intern("frames"));
  const Value other = *r.find(dicts[2], strings.intern("other"));
  EXPECT_EQ(first.tag, Tag::kHandle);
  EXPECT_EQ(first.payload, expected);
  EXPECT_EQ(second.tag, Tag::kHandle);
  EXPECT_EQ(second.payload, expected);
  // The second 'frames' list took the first one's answer; 'other' was offered (and declined) and stays a list.
  EXPECT_EQ(consumer.calls_on_lists, 2);
  ASSERT_EQ(other.tag, Tag::kList);
  EXPECT_EQ(text_items(r, other), "abcde");
}

TEST(MemoRuns, StreamedInTinyChunksGivesTheSameLists) {
  const std::string p = "\x80\x02}(" + str("s") + "](" + five_strings() + "e" + str("x") + run_list() + str("y") +
                        run_list() + str("z") + str("Q") + put(0) + "0" + run_list() + "u.";
  for (size_t chunk : {1u, 3u, 7u}) {
    StringTable strings;
    pickle::Reader r(&strings);
    r.begin();
    for (size_t i = 0; i < p.size(); i += chunk) {
      const std::string part = p.substr(i, chunk);
      ASSERT_TRUE(r.feed(bytes(part)).ok());
    }
    auto root = r.finish();
    ASSERT_TRUE(root.ok()) << root.error().describe();
    EXPECT_EQ(text_items(r, *r.find(root.value(), strings.intern("y"))), "abcde") << chunk;
    EXPECT_EQ(text_items(r, *r.find(root.value(), strings.intern("z"))), "Qbcde") << chunk;
  }
}

// A cached run's end is found without walking its opcodes: the nearest APPENDS byte ('e', 0x65) that ends a run
// with exactly a cached run's bytes (RunCache::find_ending). Memo slot 101 is 0x65, so BINGET 101 puts an 'e' inside
// an argument: it must be passed over, and a cached run that is a prefix of a longer one must not be taken for it.
TEST(MemoRuns, AnAppendsByteInsideAnArgumentIsNotTakenForTheRunsEnd) {
  std::string memo;
  for (int i = 0; i < 110; ++i) memo += str("s" + std::to_string(i)) + put(i);
  const std::string shorter = get(1) + get(2) + get(3) + get(4);             // 8 bytes: cached, a prefix of the next
  const std::string longer = shorter + get(101) + get(5) + get(101) + get(6);  // 'e' bytes at offsets 9 and 13
  auto list = [](const std::string& refs) { return "](" + refs + "e"; };
  std::string p = "\x80\x02}(" + str("m") + "](" + memo + "e";
  const char* keys[] = {"a", "b", "c", "d", "f"};
  const std::string runs[] = {shorter, longer, longer, shorter, longer};
  for (size_t i = 0; i < std::size(keys); ++i) p += str(keys[i]) + list(runs[i]);
  p += "u.";
  const std::string want_short = "s1s2s3s4", want_long = "s1s2s3s4s101s5s101s6";
  // Whole (the cache and find_ending), then in 1- and 5-byte feeds (a buffer rarely holds a run: the walk).
  for (size_t chunk : {p.size(), size_t{1}, size_t{5}}) {
    StringTable strings;
    pickle::Reader r(&strings);
    r.begin();
    for (size_t i = 0; i < p.size(); i += chunk) ASSERT_TRUE(r.feed(bytes(p.substr(i, chunk))).ok());
    auto root = r.finish();
    ASSERT_TRUE(root.ok()) << root.error().describe();
    for (size_t i = 0; i < std::size(keys); ++i)
      EXPECT_EQ(text_items(r, *r.find(root.value(), strings.intern(keys[i]))),
                runs[i] == shorter ? want_short : want_long) << keys[i] << " in feeds of " << chunk;
  }
}

// A run is guessed before it is searched for: the run that followed the same run the last time (RunCache::guess).
// A guess is taken only where the input holds its bytes and the run ends there. Here two guesses are wrong: a
// cached run that is a prefix of the list (the list goes on with another reference, not APPENDS), and a cached run
// as long as the list, with other references (APPENDS where it would end).
TEST(MemoRuns, AWrongGuessOfARunIsNotTaken) {
  std::string memo;
  for (int i = 0; i < 40; ++i) memo += str("s" + std::to_string(i)) + put(i);
  auto refs = [](int first, int n) {
    std::string r;
    for (int i = first; i < first + n; ++i) r += get(i);
    return r;
  };
  const std::string S = refs(1, 4), L = refs(1, 6), A = refs(10, 4), X = refs(20, 4), Y = refs(30, 4);
  // After A the guess is S when L comes (step 7), and X when Y comes (step 13).
  const std::string runs[] = {S, L, A, A, S, A, L, X, Y, A, X, A, Y};
  std::string p = "\x80\x02}(" + str("m") + "](" + memo + "e";
  for (size_t i = 0; i < std::size(runs); ++i) p += str("k" + std::to_string(i)) + "](" + runs[i] + "e";
  p += "u.";
  auto text = [](const std::string& run) {
    std::string t;
    for (size_t i = 0; i < run.size(); i += 2) t += "s" + std::to_string(static_cast<uint8_t>(run[i + 1]));
    return t;
  };
  StringTable strings;
  pickle::Reader r(&strings);
  auto root = r.run(bytes(p));
  ASSERT_TRUE(root.ok()) << root.error().describe();
  for (size_t i = 0; i < std::size(runs); ++i)
    EXPECT_EQ(text_items(r, *r.find(root.value(), strings.intern("k" + std::to_string(i)))), text(runs[i]))
        << "list " << i;
}

// Trace entries after the first name their keys by memo reference, the same references entry after entry; the
// reader and the snapshot builder then skip reading and classifying the keys again. That holds only while the slots
// still hold those keys. Here a BINPUT rewrites the slot of 'addr' with 'note' between two entries that reference it
// alike: Python's pickle.loads reads the third entry as {'action': 'alloc', 'note': 250, 'size': 30, 'stream': 0,
// 'time_us': 3, 'extra': None} (checked when this test was written): no address, and an unknown key. The fourth
// entry has the third's keys. Unknown keys ('extra' in every entry) are counted once per entry.
TEST(MemoRuns, EntryKeysReadFromARewrittenSlotAreReadAgain) {
  auto K = [](int v) { return std::string("K") + static_cast<char>(v); };  // BININT1
  const std::string keys = get(7) + get(8) + get(9);                        // 'action': 'alloc', 'addr'
  auto rest = [&](int size, int time) { return get(10) + K(size) + get(11) + K(0) + get(12) + K(time) + get(13); };
  const std::string e1 = "}" + put(6) + "(" + str("action") + put(7) + str("alloc") + put(8) + str("addr") + put(9) +
                         K(100) + str("size") + put(10) + K(10) + str("stream") + put(11) + K(0) + str("time_us") +
                         put(12) + K(1) + str("extra") + put(13) + "N" + "u";
  const std::string e2 = "}" + put(14) + "(" + keys + K(200) + rest(20, 2) + "N" + "u";
  const std::string rewrite = str("note") + put(9) + "0";  // slot 9 ('addr') now holds 'note'; POP
  const std::string e3 = "}" + put(15) + "(" + keys + K(250) + rest(30, 3) + "N" + "u";
  const std::string e4 = "}" + put(16) + "(" + keys + K(251) + rest(40, 4) + "N" + "u";  // the same keys as e3
  const std::string p = "\x80\x02}" + put(0) + "(" + str("segments") + put(1) + "]" + put(2) + str("device_traces") +
                        put(3) + "]" + put(4) + "]" + put(5) + "(" + e1 + e2 + rewrite + e3 + e4 + "eau.";
  auto r = load_snapshot(bytes(p));
  ASSERT_TRUE(r.ok()) << r.error().describe();
  const Snapshot& s = *r;
  ASSERT_EQ(s.events.size_rows(), 4u);
  EXPECT_EQ(s.events.addr[0], 100u);
  EXPECT_EQ(s.events.addr[1], 200u);
  EXPECT_EQ(s.events.addr[2], 0u);  // no 'addr' key: the 250 is under 'note'
  EXPECT_EQ(s.events.size[2], 30u);
  EXPECT_EQ(s.events.time_us[2], 3);
  EXPECT_EQ(s.events.addr[3], 0u);
  EXPECT_EQ(s.events.size[3], 40u);
  std::map<std::string, uint64_t> unknown(s.unknown_keys.begin(), s.unknown_keys.end());
  EXPECT_EQ(unknown["note"], 2u);
  EXPECT_EQ(unknown["extra"], 4u);
  ASSERT_NE(s.layout_of(2), nullptr);
  EXPECT_EQ(s.layout_of(2)->at(1), EntryKey::kOther);  // the 'note' key, where the others have addr
  ASSERT_NE(s.layout_of(1), nullptr);
  EXPECT_EQ(s.layout_of(1)->at(1), EntryKey::kAddr);
}

}  // namespace
}  // namespace allocscope
