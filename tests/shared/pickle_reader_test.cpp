// The pickle machine on hand-made and Python-made inputs: every opcode family, exact 64-bit integers, and clear
// errors (with byte offsets) for what a snapshot never contains.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "allocscope/loader.h"
#include "allocscope/pickle.h"

namespace allocscope {
namespace {

using pickle::Tag;
using pickle::Value;

std::vector<uint8_t> bytes(std::string_view s) { return {s.begin(), s.end()}; }

struct Parsed {
  StringTable strings;
  pickle::Reader reader{&strings};
  Result<Value> root = Error{"not run"};
};

std::unique_ptr<Parsed> parse(const std::vector<uint8_t>& b, pickle::Limits lim = {}) {
  auto p = std::make_unique<Parsed>();
  p->reader.~Reader();
  new (&p->reader) pickle::Reader(&p->strings, lim);
  p->root = p->reader.run(b);
  return p;
}

TEST(PickleReader, Protocol2DictOfScalars) {
  // {'a': 1, 'b': -2, 'c': 3.5, 'd': None, 'e': True} written by Python's pickle protocol 2.
  auto b = bytes(std::string(
      "\x80\x02\x7d\x71\x00\x28\x58\x01\x00\x00\x00\x61\x71\x01\x4b\x01\x58\x01\x00\x00\x00\x62\x71\x02\x4a"
      "\xfe\xff\xff\xff\x58\x01\x00\x00\x00\x63\x71\x03\x47\x40\x0c\x00\x00\x00\x00\x00\x00\x58\x01\x00\x00"
      "\x00\x64\x71\x04\x4e\x58\x01\x00\x00\x00\x65\x71\x05\x88\x75\x2e",
      66));
  auto p = parse(b);
  ASSERT_TRUE(p->root.ok()) << p->root.error().describe();
  const Value& d = p->root.value();
  ASSERT_EQ(d.tag, Tag::kDict);
  StringId a, bb, c, dd, e;
  ASSERT_TRUE(p->strings.find("a", &a) && p->strings.find("b", &bb) && p->strings.find("c", &c));
  ASSERT_TRUE(p->strings.find("d", &dd) && p->strings.find("e", &e));
  EXPECT_EQ(p->reader.find(d, a)->as_int(), 1);
  EXPECT_EQ(p->reader.find(d, bb)->as_int(), -2);
  EXPECT_DOUBLE_EQ(p->reader.find(d, c)->as_double(), 3.5);
  EXPECT_EQ(p->reader.find(d, dd)->tag, Tag::kNone);
  EXPECT_EQ(p->reader.find(d, e)->tag, Tag::kBool);
}

TEST(PickleReader, Long1IsExactAcrossTheFull64BitRange) {
  struct Case {
    std::string enc;
    Tag tag;
    uint64_t bits;
  };
  const Case cases[] = {
      {std::string("\x8a\x00", 2), Tag::kInt, 0},
      {std::string("\x8a\x01\xff", 3), Tag::kInt, static_cast<uint64_t>(-1)},
      {std::string("\x8a\x06\x00\x00\xfe\x87\x87\x7f", 8), Tag::kInt, 0x7f8787fe0000ULL},
      {std::string("\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f", 10), Tag::kInt, 0x7fffffffffffffffULL},
      {std::string("\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80", 10), Tag::kInt, 0x8000000000000000ULL},  // -2^63
      {std::string("\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x00", 11), Tag::kUInt, 0x8000000000000000ULL},  // 2^63
      {std::string("\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\x00", 11), Tag::kUInt, 0xffffffffffffffffULL},
  };
  for (const Case& c : cases) {
    auto p = parse(bytes("\x80\x02" + c.enc + "."));
    ASSERT_TRUE(p->root.ok()) << p->root.error().describe();
    EXPECT_EQ(p->root->tag, c.tag);
    EXPECT_EQ(p->root->payload, c.bits);
  }
  // 2^64 needs 9 bytes plus a sign byte: too wide, and the error says so.
  auto p = parse(bytes(std::string("\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01.", 14)));
  ASSERT_FALSE(p->root.ok());
  EXPECT_NE(p->root.error().message.find("wider than 64 bits"), std::string::npos);
  EXPECT_EQ(p->root.error().offset, 2u);
}

TEST(PickleReader, Protocol0TextOpcodes) {
  // pickle.dumps({'k': [1, 2.5, 'x', None, True]}, protocol=0)
  auto b = bytes("(dp0\nVk\np1\n(lp2\nI1\naF2.5\naVx\np3\naNaI01\nas.");
  auto p = parse(b);
  ASSERT_TRUE(p->root.ok()) << p->root.error().describe();
  StringId k;
  ASSERT_TRUE(p->strings.find("k", &k));
  const Value* l = p->reader.find(p->root.value(), k);
  ASSERT_NE(l, nullptr);
  auto items = p->reader.items(*l);
  ASSERT_EQ(items.size(), 5u);
  EXPECT_EQ(items[0].as_int(), 1);
  EXPECT_DOUBLE_EQ(items[1].as_double(), 2.5);
  EXPECT_EQ(p->reader.str(items[2]), "x");
  EXPECT_EQ(items[3].tag, Tag::kNone);
  EXPECT_EQ(items[4].tag, Tag::kBool);
}

TEST(PickleReader, Protocol5BytearrayAndReadonlyBuffer) {
  // BYTEARRAY8 of 3 bytes, READONLY_BUFFER, STOP
  auto p = parse(bytes(std::string("\x80\x05\x96\x03\x00\x00\x00\x00\x00\x00\x00" "abc\x98.", 17)));
  ASSERT_TRUE(p->root.ok()) << p->root.error().describe();
  EXPECT_EQ(p->root->tag, Tag::kBytes);
  auto q = parse(bytes("\x80\x05\x97."));  // NEXT_BUFFER: out-of-band data we can never have
  ASSERT_FALSE(q->root.ok());
  EXPECT_NE(q->root.error().message.find("NEXT_BUFFER"), std::string::npos);
}

TEST(PickleReader, RejectsCodeExecutionOpcodes) {
  // pickle.dumps(os.system) style: GLOBAL 'posix system' then REDUCE.
  for (std::string evil : {std::string("cposix\nsystem\n(S'echo hi'\ntR."), std::string("\x80\x04\x93.", 4),
                           std::string("\x80\x02N\x81.", 5)}) {
    auto p = parse(bytes(evil));
    ASSERT_FALSE(p->root.ok());
    EXPECT_NE(p->root.error().message.find("never executes"), std::string::npos) << p->root.error().message;
  }
}

TEST(PickleReader, TruncationNamesTheOffsetAndWhatWasExpected) {
  auto p = parse(bytes(std::string("\x80\x04\x8c\x10short", 8)));
  ASSERT_FALSE(p->root.ok());
  EXPECT_EQ(p->root.error().offset, 2u);
  EXPECT_NE(p->root.error().message.find("SHORT_BINUNICODE"), std::string::npos);
  EXPECT_NE(p->root.error().message.find("truncated"), std::string::npos);
  auto q = parse(bytes("\x80\x04N"));  // no STOP
  ASSERT_FALSE(q->root.ok());
  EXPECT_EQ(q->root.error().offset, 3u);
}

TEST(PickleReader, HugeClaimedLengthsAreCheckedBeforeAllocating) {
  // BINUNICODE8 claiming 2^60 bytes.
  auto p = parse(bytes(std::string("\x80\x04\x8d\x00\x00\x00\x00\x00\x00\x00\x10" "abc.", 15)));
  ASSERT_FALSE(p->root.ok());
  EXPECT_NE(p->root.error().message.find("truncated"), std::string::npos);
  // LONG_BINPUT at slot 4e9 must not allocate 4e9 memo slots.
  auto q = parse(bytes(std::string("\x80\x04N\x72\x00\x28\x6b\xee.", 9)));
  ASSERT_FALSE(q->root.ok());
  EXPECT_NE(q->root.error().message.find("memo index"), std::string::npos);
}

TEST(PickleReader, MissingMemoSlotIsAnError) {
  auto p = parse(bytes("\x80\x04h\x07."));
  ASSERT_FALSE(p->root.ok());
  EXPECT_NE(p->root.error().message.find("memo slot 7"), std::string::npos);
}

TEST(PickleReader, DeepNestingIsBounded) {
  std::string s = "\x80\x04";
  const int depth = 100000;
  for (int i = 0; i < depth; ++i) s += "]";
  for (int i = 0; i < depth - 1; ++i) s += "a";
  s += ".";
  auto p = parse(bytes(s));
  ASSERT_FALSE(p->root.ok());
  EXPECT_NE(p->root.error().message.find("nested deeper"), std::string::npos);
  // 100k open MARKs hit the mark limit.
  std::string m = "\x80\x04" + std::string(200000, '(');
  auto q = parse(bytes(m));
  ASSERT_FALSE(q->root.ok());
  EXPECT_NE(q->root.error().message.find("MARK"), std::string::npos);
}

TEST(PickleReader, InvalidUtf8IsRepairedNotFatal) {
  auto p = parse(bytes(std::string("\x80\x04\x8c\x03" "a\xff" "b.", 8)));
  ASSERT_TRUE(p->root.ok()) << p->root.error().describe();
  EXPECT_EQ(p->reader.str(p->root.value()), "a\xef\xbf\xbd" "b");
}

TEST(Loader, WrongTypeUnderAKnownKeyNamesTheField) {
  // {'device_traces': [[{'action': 'alloc', 'size': 'big'}]]}
  pickle::Writer w;
  w.begin_dict();
  w.key("device_traces");
  w.begin_list();
  w.begin_list();
  w.begin_dict();
  w.key("action"), w.str("alloc");
  w.key("size"), w.str("big");
  w.end_dict();
  w.end_list();
  w.end_list();
  w.end_dict();
  auto r = load_snapshot(w.finish());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("'size' is a str; expected an int"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().offset, Error::kNoOffset);
}

TEST(Loader, NotASnapshot) {
  auto r = load_snapshot(bytes("\x80\x04K\x05."));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("memory snapshot is a dict"), std::string::npos);
  auto e = load_snapshot({});
  ASSERT_FALSE(e.ok());
  auto t = load_snapshot(bytes("hello world"));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().offset, 0u);
}

TEST(Loader, TruncatedGzipIsAClearError) {
  auto raw = read_file(std::string(ALLOCSCOPE_FIXTURES) + "/gpt2_cpp.pickle.gz");
  ASSERT_TRUE(raw.ok());
  std::vector<uint8_t> cut(raw->begin(), raw->begin() + static_cast<std::ptrdiff_t>(raw->size() / 2));
  auto r = load_snapshot(cut);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("gzip"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace allocscope
