// Helpers of the hostile-input suite: fixture bytes, a raw pickle byte builder, an opcode walker (for truncation
// points) and a metered load that turns a runaway allocation into a test failure instead of a dead machine.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "allocscope/loader.h"
#include "allocscope/writer.h"
#include "alloc_meter.h"

namespace hostile {

using Bytes = std::vector<uint8_t>;

inline std::string fixture_path(const std::string& name) { return std::string(ALLOCSCOPE_FIXTURES) + "/" + name; }

// The pickle bytes of a fixture (inflated when it is a .gz).
inline Bytes fixture_pickle(const std::string& name) {
  auto raw = allocscope::read_file(fixture_path(name));
  if (!raw.ok()) return {};
  if (!allocscope::is_gzip(raw.value())) return std::move(raw).value();
  auto in = allocscope::gunzip(raw.value());
  return in.ok() ? std::move(in).value() : Bytes{};
}

inline Bytes fixture_raw(const std::string& name) {
  auto raw = allocscope::read_file(fixture_path(name));
  return raw.ok() ? std::move(raw).value() : Bytes{};
}

// Raw pickle bytes, opcode by opcode (little-endian arguments as pickle wants them).
struct P {
  Bytes b;
  P() = default;
  explicit P(int proto) { op(0x80).u8(static_cast<uint8_t>(proto)); }
  P& op(uint8_t c) { b.push_back(c); return *this; }
  P& u8(uint8_t v) { b.push_back(v); return *this; }
  P& u16(uint16_t v) { return raw(&v, 2); }
  P& u32(uint32_t v) { return raw(&v, 4); }
  P& u64(uint64_t v) { return raw(&v, 8); }
  P& raw(const void* p, size_t n) {
    const auto* c = static_cast<const uint8_t*>(p);
    b.insert(b.end(), c, c + n);
    return *this;
  }
  P& text(std::string_view s) { return raw(s.data(), s.size()); }
  P& repeat(std::string_view s, size_t n) {
    b.reserve(b.size() + s.size() * n);
    for (size_t i = 0; i < n; ++i) text(s);
    return *this;
  }
  // Values.
  P& str(std::string_view s) {  // SHORT_BINUNICODE / BINUNICODE
    if (s.size() < 256) op(0x8c).u8(static_cast<uint8_t>(s.size()));
    else op('X').u32(static_cast<uint32_t>(s.size()));
    return text(s);
  }
  P& i(int64_t v) {  // BININT1 / BININT / LONG1
    if (v >= 0 && v < 256) return op('K').u8(static_cast<uint8_t>(v));
    if (v >= INT32_MIN && v <= INT32_MAX) return op('J').u32(static_cast<uint32_t>(static_cast<int32_t>(v)));
    return op(0x8a).u8(8).u64(static_cast<uint64_t>(v));
  }
  P& f(double d) {  // BINFLOAT (big-endian)
    uint64_t bits;
    std::memcpy(&bits, &d, 8);
    bits = __builtin_bswap64(bits);
    return op('G').raw(&bits, 8);
  }
  P& none() { return op('N'); }
  P& mark() { return op('('); }
  P& dict() { return op('}'); }
  P& list() { return op(']'); }
  P& setitem() { return op('s'); }
  P& setitems() { return op('u'); }
  P& append() { return op('a'); }
  P& appends() { return op('e'); }
  P& put(uint32_t slot) { return op('r').u32(slot); }   // LONG_BINPUT
  P& get(uint32_t slot) { return op('j').u32(slot); }   // LONG_BINGET
  P& stop() { return op('.'); }
  Bytes done() { stop(); return std::move(b); }
};

// Offsets where each opcode starts (protocols 0-5), for truncating exactly at and just after opcode boundaries.
// Stops at the first byte it does not understand.
inline std::vector<size_t> opcode_starts(const Bytes& b) {
  std::vector<size_t> out;
  size_t i = 0;
  auto le = [&](size_t at, int n) {
    uint64_t v = 0;
    for (int k = 0; k < n && at + k < b.size(); ++k) v |= static_cast<uint64_t>(b[at + k]) << (8 * k);
    return v;
  };
  auto line = [&](size_t at) {
    while (at < b.size() && b[at] != '\n') ++at;
    return at + 1;
  };
  while (i < b.size()) {
    out.push_back(i);
    const uint8_t op = b[i++];
    switch (op) {
      case 0x80: case 'K': case 'q': case 'h': case 0x82: i += 1; break;
      case 'M': case 0x83: i += 2; break;
      case 'J': case 'r': case 'j': case 0x84: i += 4; break;
      case 0x95: case 'G': i += 8; break;
      case 0x8c: case 'U': case 'C': case 0x8a: i += 1 + le(i, 1); break;
      case 'X': case 'T': case 'B': case 0x8b: i += 4 + le(i, 4); break;
      case 0x8d: case 0x8e: case 0x96: i += 8 + le(i, 8); break;
      case 'I': case 'L': case 'F': case 'S': case 'V': case 'p': case 'g': case 'P': i = line(i); break;
      case 'c': case 'i': i = line(line(i)); break;
      case '.': return out;
      default:
        if (op < 0x20 || (op > 0x98)) return out;
        break;
    }
  }
  return out;
}

// Outcome of one metered load.
struct Outcome {
  bool ok = false;
  bool over_budget = false;  // an allocation would have exceeded the cap
  allocscope::Error error;
  int64_t peak_bytes = 0;
  size_t events = 0;
};

inline Outcome load_metered(const Bytes& in, const allocscope::LoadOptions& opt = {},
                            int64_t cap = int64_t{64} << 20) {
  Outcome o;
  Meter m(cap);
  try {
    auto r = allocscope::load_snapshot(in, opt);
    o.ok = r.ok();
    if (r.ok()) o.events = r->events.size_rows();
    else o.error = r.error();
  } catch (const std::bad_alloc&) {
    o.over_budget = true;
  }
  o.peak_bytes = m.peak_bytes();
  return o;
}

// What every failed load must look like: a message, and an offset inside the input (or none for whole-file errors).
inline void expect_good_error(const Outcome& o, size_t input_size, const std::string& what) {
  EXPECT_FALSE(o.over_budget) << what << ": allocated more than the cap";
  if (o.ok || o.over_budget) return;
  EXPECT_FALSE(o.error.message.empty()) << what;
  if (o.error.offset != allocscope::Error::kNoOffset) {
    EXPECT_LE(o.error.offset, input_size) << what << ": " << o.error.describe();
  }
}

}  // namespace hostile
