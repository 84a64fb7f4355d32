// Memory per input byte: 1 MB inputs made of one pattern each (the cheapest way to make the loader build lists,
// dicts, strings, memo slots, rows, frames, stacks) must cost a bounded multiple of their size, so memory is
// linear in the file (for raw input; gzip multiplies by up to max_inflated_bytes / file size, see gzip_test.cpp).
#include <string>

#include "hostile.h"

namespace hostile {
namespace {

constexpr size_t kInput = 1 << 20;

struct Pattern {
  const char* what;
  Bytes in;
};

Bytes repeat_until(P p, std::string_view unit, std::string_view tail) {
  while (p.b.size() + unit.size() + tail.size() < kInput) p.text(unit);
  p.text(tail);
  return p.done();
}

std::vector<Pattern> patterns() {
  std::vector<Pattern> out;
  out.push_back({"lists left on the stack", repeat_until(P(2), "]", "")});
  out.push_back({"lists popped", repeat_until(P(2), "]0", "")});
  out.push_back({"None values on the stack", repeat_until(P(2), "N", "")});
  out.push_back({"memoized None", repeat_until(P(4), std::string_view("N\x94", 2), "")});
  out.push_back({"one big dict", repeat_until(P(2).dict().mark(), "NN", "u")});
  out.push_back({"one big list", repeat_until(P(2).list().mark(), "N", "e")});
  out.push_back({"nested pairs of lists", repeat_until(P(2).list(), "]a", "")});
  {
    P p(2);
    for (uint32_t i = 0; p.b.size() < kInput - 16; ++i) {
      char s[5];
      std::memcpy(s, &i, 4);
      p.op(0x8c).u8(4).raw(s, 4).op('0');  // distinct 4-byte strings
    }
    out.push_back({"distinct short strings", p.done()});
  }
  {
    // Trace rows: {'action': 'alloc', 'size': i} with memoized key strings, all under one device trace.
    P p(2);
    p.dict().str("device_traces").list().list().mark();
    p.dict().mark().str("action").put(0).str("alloc").put(1).str("size").i(0).setitems();
    while (p.b.size() < kInput - 32) p.dict().mark().get(0).get(1).setitems();
    p.appends().append().setitem();
    out.push_back({"trace rows", p.done()});
  }
  {
    // Distinct frames, each in its own one-frame stack of a trace row.
    P p(2);
    p.str("name").put(0).str("filename").put(1).str("line").put(2).str("frames").put(3).str("action").put(4);
    p.op('0').op('0').op('0').op('0').op('0');
    p.dict().str("device_traces").list().list().mark();
    for (uint32_t i = 0; p.b.size() < kInput - 64; ++i)
      p.dict().mark().get(4).get(4).get(3).list().dict().mark().get(0).get(0).get(1).get(1).get(2).i(i).setitems()
          .append().setitems();
    p.appends().append().setitem();
    out.push_back({"distinct frames", p.done()});
  }
  {
    // One frame, many distinct stacks (stack i repeats it i % 64 + 1 times... then varies the line).
    P p(2);
    p.dict().str("device_traces").list().list().mark();
    for (uint32_t i = 0; p.b.size() < kInput - 256; ++i) {
      p.dict().mark().str("action").str("alloc").str("frames").list().mark();
      for (uint32_t k = 0; k < 8; ++k)
        p.dict().mark().str("name").str("f").str("filename").str("x").str("line").i((i >> (3 * k)) & 7).setitems();
      p.appends().setitems();
    }
    p.appends().append().setitem();
    out.push_back({"distinct stacks", p.done()});
  }
  return out;
}

TEST(Amplification, PeakMemoryIsLinearInTheInput) {
  for (const Pattern& pt : patterns()) {
    ASSERT_LE(pt.in.size(), kInput) << pt.what;
    Outcome o = load_metered(pt.in, {}, int64_t{512} << 20);
    expect_good_error(o, pt.in.size(), pt.what);
    const double ratio = static_cast<double>(o.peak_bytes) / static_cast<double>(pt.in.size());
    std::printf("%-28s %8zu bytes -> peak %10lld bytes (%6.1f x) %s\n", pt.what, pt.in.size(),
                static_cast<long long>(o.peak_bytes), ratio,
                o.ok ? "loaded" : o.error.describe().substr(0, 60).c_str());
    // A fixed multiple: containers cost a 64-byte node per 1-2 input bytes, and vectors double while growing.
    EXPECT_LT(ratio, 256.0) << pt.what;
  }
}

}  // namespace
}  // namespace hostile
