// Crafted pickles: 100k-deep nesting of every container kind, 2^60-byte length claims, memo slots that do not exist,
// and wrong types under every known key. Each must give an error that names what was expected and where.
#include <algorithm>
#include <functional>

#include "hostile.h"

namespace hostile {
namespace {

using allocscope::Error;

void expect_error(const Bytes& in, const std::string& needle, const std::string& what,
                  int64_t cap = int64_t{64} << 20) {
  Outcome o = load_metered(in, {}, cap);
  expect_good_error(o, in.size(), what);
  ASSERT_FALSE(o.ok) << what << " loaded";
  if (o.over_budget) return;
  EXPECT_NE(o.error.message.find(needle), std::string::npos) << what << ": " << o.error.describe();
  EXPECT_NE(o.error.offset, Error::kNoOffset) << what << ": " << o.error.describe();
  EXPECT_LT(o.peak_bytes, cap) << what;
}

// ---- Nesting: 100k levels of every container, built the ways a pickle can build them.

constexpr size_t kDeep = 100000;

TEST(Nesting, Lists) {  // ]]]]...aaaa
  expect_error(P(2).repeat("]", kDeep).repeat("a", kDeep - 1).done(), "nested deeper", "lists");
}

TEST(Nesting, Dicts) {  // {1: {1: {...}}} via EMPTY_DICT, key, ..., SETITEM
  expect_error(P(2).repeat("}K\x01", kDeep).op('}').repeat("s", kDeep).done(), "nested deeper", "dicts");
}

TEST(Nesting, Tuples) {  // (((None,),),) via TUPLE1
  expect_error(P(2).none().repeat("\x85", kDeep).done(), "nested deeper", "tuples");
}

TEST(Nesting, ListsFromMarks) {  // ((((...llll: more MARKs than the limit
  expect_error(P(2).repeat("(", kDeep).repeat("l", kDeep).done(), "MARK", "marks");
}

TEST(Nesting, ListsFromMarksUnderTheMarkLimit) {  // 60000 marks are allowed, 60000 levels are not
  expect_error(P(2).repeat("(", 60000).repeat("l", 60000).done(), "nested deeper", "mark lists");
}

TEST(Nesting, TuplesAndDictsFromMarks) {
  expect_error(P(2).repeat("(", 60000).repeat("t", 60000).done(), "nested deeper", "mark tuples");
  expect_error(P(2).repeat("(K\x01", 60000).op('}').repeat("d", 60000).done(), "nested deeper", "mark dicts");
}

TEST(Nesting, Sets) {  // frozenset of frozenset...
  expect_error(P(4).repeat("(", 60000).repeat("\x91", 60000).done(), "nested deeper", "frozensets");
}

TEST(Nesting, UnclosedMarksAndValuesAtStop) {
  expect_error(P(2).repeat("(", 1000).done(), "STOP", "open marks at STOP");
  expect_error(P(2).repeat("N", 100000).done(), "STOP", "many values at STOP");
  expect_error(P(2).repeat("]", 100000).done(), "STOP", "many lists at STOP");
}

TEST(Nesting, SelfReferencesFinish) {  // a list appended to itself 100k times, then used as the snapshot
  P p(2);
  p.dict().str("device_traces").list().repeat("2a", kDeep).setitem();
  Bytes in = p.done();
  Outcome o = load_metered(in);
  expect_good_error(o, in.size(), "self-referencing list");
  EXPECT_FALSE(o.ok);
}

// ---- Length claims far beyond the input: checked before anything is allocated.

TEST(HugeClaims, LengthsOf2To60) {
  const uint64_t huge = uint64_t{1} << 60;
  struct Case {
    const char* what;
    Bytes in;
  };
  std::vector<Case> cases = {
      {"BINUNICODE8", P(4).op(0x8d).u64(huge).text("abc").done()},
      {"BINBYTES8", P(4).op(0x8e).u64(huge).text("abc").done()},
      {"BYTEARRAY8", P(5).op(0x96).u64(huge).text("abc").done()},
      {"FRAME", P(4).op(0x95).u64(huge).none().done()},
      {"FRAME of 2^64-1", P(4).op(0x95).u64(~uint64_t{0}).none().done()},
      {"BINUNICODE8 of 2^64-1", P(4).op(0x8d).u64(~uint64_t{0}).done()},
      {"LONG4 of 2^31-1", P(2).op(0x8b).u32(0x7fffffff).text("abc").done()},
      {"LONG4 negative", P(2).op(0x8b).u32(0x80000000).text("abc").done()},
      {"BINUNICODE 2^32-1", P(2).op('X').u32(0xffffffff).text("abc").done()},
      {"BINBYTES 2^32-1", P(3).op('B').u32(0xffffffff).text("abc").done()},
      {"BINSTRING negative", P(2).op('T').u32(0x80000000).text("abc").done()},
      {"BINSTRING 2^31-1", P(2).op('T').u32(0x7fffffff).text("abc").done()},
      {"SHORT_BINUNICODE 255", P(2).op(0x8c).u8(255).text("abc").done()},
      {"LONG1 255", P(2).op(0x8a).u8(255).text("abc").done()},
  };
  for (const Case& c : cases) {
    Outcome o = load_metered(c.in, {}, int64_t{1} << 20);  // nothing near the claimed size may be allocated
    expect_good_error(o, c.in.size(), c.what);
    ASSERT_FALSE(o.ok) << c.what;
    EXPECT_EQ(o.error.offset, 2u) << c.what << ": " << o.error.describe();  // the opcode after PROTO
    EXPECT_LT(o.peak_bytes, int64_t{1} << 20) << c.what;
  }
}

TEST(HugeClaims, HugeCountsInSmallFiles) {
  // A frame that claims less than the rest of the file is fine; one that claims more says how much is left.
  expect_error(P(4).op(0x95).u64(100).none().done(), "frame of 100 bytes", "short FRAME");
  // LONG4 that fits but is 1 MB wide: an integer wider than 64 bits.
  P p(2);
  p.op(0x8b).u32(1 << 20).repeat(std::string_view("\x01", 1), 1 << 20);
  expect_error(p.done(), "wider than 64 bits", "wide LONG4");
  // An integer line of 100k digits, a float line of 100k digits, a memo index of 100k digits.
  expect_error(P().text("I").repeat("9", 100000).text("\n").done(), "decimal integer", "long INT line");
  expect_error(P().text("g").repeat("9", 100000).text("\n").done(), "memo", "long GET line");
  Outcome f = load_metered(P().text("F").repeat("9", 100000).text("\n").done());
  expect_good_error(f, 100003, "long FLOAT line");
}

// ---- Memo slots that were never stored.

TEST(Memo, MissingSlots) {
  expect_error(P(2).op('h').u8(7).done(), "memo slot 7", "BINGET 7");
  expect_error(P(2).get(0xffffffff).done(), "memo slot 4294967295", "LONG_BINGET 2^32-1");
  expect_error(P().text("g99999999999999999999999\n.").done(), "memo index", "GET overflow");
  expect_error(P().text("g-1\n.").done(), "memo slot", "GET -1");
  expect_error(P(2).none().put(5).op('0').get(3).done(), "memo slot 3", "hole below a sparse PUT");
  expect_error(P(2).none().put(0).op('0').get(1).done(), "memo slot 1", "one past the end");
  // BINPUT with nothing (or only a MARK) on the stack.
  expect_error(P(2).op('q').u8(0).done(), "memoize", "BINPUT on an empty stack");
  expect_error(P(2).mark().op('q').u8(0).done(), "MARK", "BINPUT on a MARK");
  // Far slots are refused (the memo is never grown to them).
  expect_error(P(2).none().put(0xfffffff0).done(), "memo index", "LONG_BINPUT 2^32-16", int64_t{1} << 20);
  expect_error(P(2).none().put(1u << 28).done(), "memo index", "LONG_BINPUT 2^28", int64_t{1} << 20);
}

TEST(Memo, ConsumedObjectReferencedAgain) {
  // A trace entry is consumed into a row when appended; its memo slot then names the row, and using the row as a
  // list target is an error, not a use-after-recycle.
  P p(2);
  p.dict().str("device_traces").list().list().dict().put(0).mark().str("action").str("alloc").setitems();
  p.append().get(0).i(1).append();
  expect_error(p.done(), "", "append to a consumed entry");
}

// Trace lists count their entries instead of holding them (Consumer::absorbs), which needs each list's entries to
// arrive in stream order: entries of two lists interleaved, or one list holding both new entries and an entry shared
// through the memo, are errors with an offset, never a wrong device assignment.
TEST(Memo, TraceListsInterleavedOrMixed) {
  auto entry = [](P& p) { p.dict().mark().str("action").str("alloc").str("addr").i(1).str("size").i(2).setitems(); };
  P a(2);
  a.dict().str("device_traces").list();
  a.list().put(1);
  entry(a);
  a.append();  // A: row 0
  a.list().put(2);
  entry(a);
  a.append();  // B: row 1
  a.get(1);
  entry(a);
  a.append();  // A again: row 2, after B's row 1
  expect_error(a.done(), "not in stream order", "two trace lists' entries interleaved");

  P m(2);
  m.dict().str("device_traces").list().list();
  entry(m);
  m.put(3).append();  // row 0, absorbed
  m.get(3).append();  // the same entry again through the memo: a row handle the list stores
  m.append().setitem();
  expect_error(m.done(), "mixes new entries", "a trace list with a new and a shared entry");
}

// ---- Wrong types under known keys: the error names the field and the expected type.

// {'device_traces': [[{'action': 'alloc', 'addr': 1, 'size': 2, <field>}]]}
Bytes entry_with(const std::function<void(P&)>& field) {
  P p(2);
  p.dict().str("device_traces").list().list().dict().mark();
  p.str("action").str("alloc").str("addr").i(1).str("size").i(2);
  field(p);
  p.setitems().append().append().setitem();
  return p.done();
}

// {'segments': [{'address': 1, 'total_size': 2, <field>}]}
Bytes segment_with(const std::function<void(P&)>& field) {
  P p(2);
  p.dict().str("segments").list().dict().mark().str("address").i(1).str("total_size").i(2);
  field(p);
  p.setitems().append().setitem();
  return p.done();
}

// {'segments': [{'blocks': [{'size': 1, <field>}]}]}
Bytes block_with(const std::function<void(P&)>& field) {
  P p(2);
  p.dict().str("segments").list().dict().str("blocks").list().dict().mark().str("size").i(1);
  field(p);
  p.setitems().append().setitem().append().setitem();
  return p.done();
}

// {<key>: <value>}
Bytes top_with(const std::string& key, const std::function<void(P&)>& value) {
  P p(2);
  p.dict().str(key);
  value(p);
  p.setitem();
  return p.done();
}

Bytes annotation_with(const std::function<void(P&)>& field) {
  P p(2);
  p.dict().str("external_annotations").list().dict().mark().str("stage").str("START");
  field(p);
  p.setitems().append().setitem();
  return p.done();
}

struct TypeCase {
  const char* what;
  Bytes in;
  const char* needle;
};

TEST(WrongTypes, TraceEntryFields) {
  std::vector<TypeCase> cases = {
      {"size is a str", entry_with([](P& p) { p.str("size").str("big"); }), "'size' is a str; expected an int"},
      {"addr is a list", entry_with([](P& p) { p.str("addr").list(); }), "'addr' is a list"},
      {"stream is None", entry_with([](P& p) { p.str("stream").none(); }), "'stream' is a None"},
      {"time_us is a str", entry_with([](P& p) { p.str("time_us").str("now"); }), "'time_us' is a str"},
      {"action is an int", entry_with([](P& p) { p.str("action").i(3); }), "'action' is a int; expected a str"},
      {"frames is a dict", entry_with([](P& p) { p.str("frames").dict().str("x").i(1).setitem(); }),
       "'frames' is a dict"},
      {"frames is an int", entry_with([](P& p) { p.str("frames").i(7); }), "'frames' is a int"},
      {"frames holds ints", entry_with([](P& p) { p.str("frames").list().i(1).append(); }), "'frames' holds a int"},
      {"frames holds a dict with a str line",
       entry_with([](P& p) {
         p.str("frames").list().dict().mark().str("name").str("f").str("filename").str("x.py").str("line");
         p.str("12").setitems().append();
       }),
       "'frames' holds a dict"},
      {"a non-string key", entry_with([](P& p) { p.i(5).i(6); }), "non-string key"},
  };
  for (const TypeCase& c : cases) expect_error(c.in, c.needle, c.what);
}

TEST(WrongTypes, SegmentAndBlockFields) {
  std::vector<TypeCase> cases = {
      {"total_size is a float", segment_with([](P& p) { p.str("total_size").f(1.5); }), "'total_size' is a float"},
      {"device is a str", segment_with([](P& p) { p.str("device").str("cuda:0"); }), "'device' is a str"},
      {"blocks is an int", segment_with([](P& p) { p.str("blocks").i(3); }), "'blocks' is a int"},
      {"frames is a str", segment_with([](P& p) { p.str("frames").str("f"); }), "'frames' is a str"},
      {"a block is a list",
       top_with("segments", [](P& p) { p.list().dict().str("blocks").list().list().append().setitem().append(); }),
       "a block is a list"},
      {"block state is an int", block_with([](P& p) { p.str("state").i(1); }), "'state' is a int"},
      {"block size is a dict", block_with([](P& p) { p.str("size").dict(); }), "'size' is a dict"},
      {"block requested_size is bytes", block_with([](P& p) { p.str("requested_size").op('C').u8(1).u8(0); }),
       "'requested_size' is a bytes"},
  };
  for (const TypeCase& c : cases) expect_error(c.in, c.needle, c.what);
}

// Fields no answer reads (PyTorch's tools neither), of another type: loaded, and a warning says what was ignored.
// They were refused whole, where PyTorch's _memory_viz.py reads the file (an audit: None in segment_pool_id,
// segment_type, is_expandable; tests/fixtures/hostile_valid has real files of the kind).
TEST(WrongTypes, FieldsNoAnswerReadsAreIgnoredAndSaid) {
  const std::vector<std::pair<std::string, Bytes>> cases = {
      {"segment 'segment_type' not a str", segment_with([](P& p) { p.str("segment_type").i(1); })},
      {"segment 'segment_pool_id' not a tuple of ints", segment_with([](P& p) { p.str("segment_pool_id").str("(0, 0)"); })},
      {"segment 'segment_pool_id' not a tuple of ints",
       segment_with([](P& p) { p.str("segment_pool_id").str("a").str("b").op(0x86); })},
      {"segment 'is_expandable' not a bool", segment_with([](P& p) { p.str("is_expandable").str("yes"); })},
  };
  for (const auto& [said, in] : cases) {
    auto r = allocscope::load_snapshot(in);
    ASSERT_TRUE(r.ok()) << said << ": " << r.error().describe();
    bool found = false;
    for (const std::string& w : r->warnings) found = found || w.find(said) != std::string::npos;
    EXPECT_TRUE(found) << said;
  }
}

TEST(WrongTypes, TopLevelShapes) {
  std::vector<TypeCase> cases = {
      {"segments is a dict", top_with("segments", [](P& p) { p.dict(); }), "'segments' is a dict; expected a list"},
      {"a segment is a list", top_with("segments", [](P& p) { p.list().list().append(); }), "a segment is a list"},
      {"a segment is an int", top_with("segments", [](P& p) { p.list().i(4).append(); }), "a segment is a int"},
      {"device_traces is a dict", top_with("device_traces", [](P& p) { p.dict(); }), "'device_traces' is a dict"},
      {"a device trace is an int", top_with("device_traces", [](P& p) { p.list().i(4).append(); }),
       "device trace 0 is a int"},
      {"a trace entry is a str", top_with("device_traces", [](P& p) { p.list().list().str("x").append().append(); }),
       "a trace entry is a str"},
      {"a trace entry without action", top_with("device_traces",
                                                [](P& p) { p.list().list().dict().append().append(); }),
       "a trace entry is a dict"},
      {"external_annotations is a dict", top_with("external_annotations", [](P& p) { p.dict(); }),
       "'external_annotations' is a dict"},
      {"an annotation is a list", top_with("external_annotations", [](P& p) { p.list().list().append(); }),
       "an annotation is a list"},
      {"annotation stage is an int", annotation_with([](P& p) { p.str("stage").i(1); }), "'stage' is a int"},
      {"annotation time_us is a str", annotation_with([](P& p) { p.str("time_us").str("t"); }), "'time_us' is a str"},
      {"root is an int", P(2).i(5).done(), "memory snapshot is a dict"},
      {"root is a str", P(2).str("segments").done(), "memory snapshot is a dict"},
      {"root is None", P(2).none().done(), "memory snapshot is a dict"},
      {"root has an int key", P(2).dict().i(1).i(2).setitem().done(), "non-string key"},
  };
  for (const TypeCase& c : cases) expect_error(c.in, c.needle, c.what);
}

// Scalars where a list is expected have no container offset of their own; the error must still say where.
TEST(WrongTypes, ScalarsUnderTopLevelKeysNameAnOffset) {
  std::vector<TypeCase> cases = {
      {"segments is an int", top_with("segments", [](P& p) { p.i(1); }), "'segments' is a int"},
      {"device_traces is a str", top_with("device_traces", [](P& p) { p.str("x"); }), "'device_traces' is a str"},
      {"external_annotations is None", top_with("external_annotations", [](P& p) { p.none(); }),
       "'external_annotations' is a None"},
  };
  for (const TypeCase& c : cases) expect_error(c.in, c.needle, c.what);
}

TEST(WrongTypes, UnexpectedButHarmlessShapesLoad) {
  // allocator_settings that is not a dict is ignored; unknown keys beside a snapshot's are counted, not fatal (a dict
  // with none of a snapshot's keys is another pickle, refused: Refused.PicklesThatAreNotSnapshots).
  Bytes beside;
  {
    P p(2);
    p.dict().mark().str("segments").list().str("whatever").i(1).setitems();
    beside = p.done();
  }
  for (const Bytes& in : {top_with("allocator_settings", [](P& p) { p.list(); }), beside,
                          entry_with([](P& p) { p.str("extra").list(); }),
                          entry_with([](P& p) { p.str("frames").none(); })}) {
    Outcome o = load_metered(in);
    EXPECT_TRUE(o.ok) << o.error.describe();
  }
}

// Issue 40: `pickle.dump({'a': [1, 2, 3]})`, `{}` and `[1, 2, 3]` loaded as empty snapshots (exit status 0).
TEST(Refused, PicklesThatAreNotSnapshots) {
  std::vector<TypeCase> cases = {
      {"a dict of other keys", top_with("a", [](P& p) { p.list().i(1).append(); }), "not a memory snapshot: a dict with the key(s) 'a'"},
      {"an empty dict", P(2).dict().done(), "not a memory snapshot: an empty dict"},
      {"a list of ints", P(2).list().i(1).append().done(), "not a memory snapshot: it holds a list of int"},
  };
  for (const TypeCase& c : cases) expect_error(c.in, c.needle, c.what);
}

// ---- Code-execution opcodes anywhere in a real file are refused.

TEST(Refused, ClassAndCallOpcodesInsideARealFile) {
  Bytes full = fixture_pickle("oom.pickle");
  ASSERT_FALSE(full.empty());
  std::vector<size_t> starts = opcode_starts(full);
  for (int op : {int{'c'}, 0x93, int{'R'}, int{'b'}, int{'i'}, int{'o'}, 0x81, 0x92, int{'P'}, int{'Q'}, 0x82, 0x83, 0x84, 0x97}) {
    for (size_t k = 10; k < starts.size(); k += starts.size() / 7) {
      Bytes b = full;
      b.insert(b.begin() + static_cast<std::ptrdiff_t>(starts[k]), static_cast<uint8_t>(op));
      Outcome o = load_metered(b);
      ASSERT_FALSE(o.ok) << "opcode " << int(op);
      EXPECT_EQ(o.error.offset, starts[k]) << o.error.describe();
    }
  }
}


// ---- Keys no PyTorch version we know writes, at every level, are counted and never stop a load; a frame line
// above 2^63 (torch.compile writes 2^64-1 for fake frames) is kept exactly.

TEST(UnknownKeys, AtEveryLevelLoadAndAreCounted) {
  const auto frame = [](P& p, bool huge_line) {
    p.dict().mark().str("name").str("f").str("filename").str("x.py").str("line");
    if (huge_line) p.op(0x8a).u8(9).u64(UINT64_MAX).u8(0);  // LONG1: 2^64-1 needs a ninth, zero byte
    else p.i(7);
    p.str("frame_extra").i(1).setitems();
  };
  P p(2);
  p.dict().mark();
  p.str("segments").list().dict().mark().str("address").i(4096).str("total_size").i(512).str("segment_extra").list();
  p.str("blocks").list().dict().mark().str("address").i(4096).str("size").i(512).str("requested_size").i(500);
  p.str("state").str("active_allocated").str("block_extra").dict().str("frames").list();
  frame(p, false);
  p.append().setitems().append().setitems().append();
  p.str("device_traces").list().list().dict().mark().str("action").str("alloc").str("addr").i(4096).str("size").i(500);
  p.str("entry_extra").str("x").str("frames").list();
  frame(p, true);
  p.append().setitems().append().append();
  p.str("top_extra").none().setitems();
  const Bytes in = p.done();
  auto r = allocscope::load_snapshot(in);
  ASSERT_TRUE(r.ok()) << r.error().describe();
  const allocscope::Snapshot& s = r.value();
  ASSERT_EQ(s.segments.size(), 1u);
  ASSERT_EQ(s.blocks.size(), 1u);
  EXPECT_EQ(s.blocks[0].requested_size, 500u);
  ASSERT_EQ(s.events.size_rows(), 1u);
  const auto stack = s.stack(s.events.stack[0]);
  ASSERT_EQ(stack.size(), 1u);
  EXPECT_EQ(allocscope::line_text(s.frames[stack[0]]), "18446744073709551615");
  EXPECT_EQ(allocscope::line_text(s.frames[s.stack(s.blocks[0].stack)[0]]), "7");
  std::vector<std::string> unknown;
  for (const auto& [key, count] : s.unknown_keys) unknown.push_back(key);
  for (const char* key : {"segment_extra", "block_extra", "entry_extra", "top_extra", "frame_extra"})
    EXPECT_NE(std::find(unknown.begin(), unknown.end(), key), unknown.end()) << key << " not counted";
}

}  // namespace
}  // namespace hostile
