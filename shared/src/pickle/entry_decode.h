// A trace entry's dict decoded from its bytes alone (private to shared/src/pickle).
//
// Machine::entry_fast reads a trace entry (or a frame) in two steps: this decode, which looks at nothing but the
// input's bytes and a cache of runs it owns, and the machine's apply, which does everything that depends on the
// parse so far (memo slots, interned strings, the consumer). Because the decode of the bytes at an offset never
// depends on what came before them, a second thread can decode entries ahead of the parser (predecoder.h) and the
// parser applies them when it reaches the same offset: the same decode, only earlier.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "allocscope/pickle.h"
#include "pickle/opcodes.h"
#include "pickle/run_cache.h"

namespace allocscope::pickle::detail {

// One key or value of the dict. 16 bytes, so a decoded entry crosses from one core to the other in a few lines.
struct EntryToken {
  enum Kind : uint8_t { kRef, kScalar, kStr, kList };
  Kind kind = kRef;
  uint8_t x = 0;      // kScalar: its Tag; kList: length of the memo store right after EMPTY_LIST (0, 1, 2 or 5);
                      // kStr: 1 when its bytes (at most 8) are in `b` itself rather than at offset `b`
  uint8_t after = 0;  // kStr, kList: length of the memo store that follows it (0: none)
  uint32_t a = 0;     // kRef: memo index; kStr: byte length; kList: byte length of its run of memo references
  uint64_t b = 0;     // kScalar: payload; kStr: offset of its bytes; kList: offset of its run | run id << kRunShift
  static constexpr int kRunShift = 40;
  static constexpr uint64_t kOffsetMask = (uint64_t{1} << kRunShift) - 1;
};

struct DecodedEntry {
  static constexpr size_t kPairs = 16;  // trace entries have at most 9 keys, frames 3
  uint64_t at = 0;        // offset (in the decoded buffer) of the byte after EMPTY_DICT
  uint64_t setitems = 0;  // offset of its SETITEMS
  uint8_t dict_store = 0;  // length of the memo store after EMPTY_DICT (0, 1, 2 or 5)
  uint8_t n = 0;           // tokens: key, value, key, value, ...
  EntryToken tok[2 * kPairs];
};

// The length of a memo store opcode at `op` as its bytes read (MEMOIZE 1, BINPUT 2, LONG_BINPUT 5), 0 for
// anything else or a store cut by the end. Whether it stores into the right slot is the apply's to check.
inline size_t raw_store_len(const uint8_t* op, const uint8_t* end) {
  if (op >= end) return 0;
  switch (*op) {
    case kMEMOIZE: return 1;
    case kBINPUT: return end - op >= 2 ? 2 : 0;
    case kLONG_BINPUT: return end - op >= 5 ? 5 : 0;
    default: return 0;
  }
}

// A LONG1 of 1..8 bytes (addresses, times): little-endian two's complement, sign-extended. With 8 bytes `avail`
// it is one load and the shifts drop what lies past the number; a variable-length copy stalls the load after it.
inline int64_t small_long(const uint8_t* b, size_t n, size_t avail) {
  uint64_t w = 0;
  std::memcpy(&w, b, avail >= 8 ? 8 : n);
  const int shift = static_cast<int>(64 - 8 * n);
  return static_cast<int64_t>(w << shift) >> shift;
}

// Decodes BINGET or LONG_BINGET at q (complete before `end`) into its memo index and moves q past it; false for
// anything else.
inline bool memo_ref(const uint8_t*& q, const uint8_t* end, uint64_t* idx) {
  if (end - q >= 2 && *q == kBINGET) {
    *idx = q[1];
    q += 2;
    return true;
  }
  if (end - q >= 5 && *q == kLONG_BINGET) {
    uint32_t i32;
    std::memcpy(&i32, q + 1, 4);
    *idx = i32;
    q += 5;
    return true;
  }
  return false;
}

// Where a run of memo references starting at `p` ends at an APPENDS (that byte), or null: a cheap scan of BINGET
// and LONG_BINGET only; anything odd goes the slow way.
inline const uint8_t* memo_run_end(const uint8_t* p, const uint8_t* end) {
  const uint8_t* q = p;
  while (end - q >= 5) {
    if (*q == kBINGET) q += 2;
    else if (*q == kLONG_BINGET) q += 5;
    else break;
  }
  return q < end && *q == kAPPENDS ? q : nullptr;
}

// The run of memo references that starts at `p` and ends at an APPENDS (at *run_end), as `runs` knows it: guessed
// from `context` (run_context), found by its end, or walked and looked up; then learnt for the next guess. `add`:
// cache a run not known yet (the decode-ahead thread's cache; the parser's general path adds its runs with their
// values). kNone when it is not (or cannot be) cached.
// Inlined: a call here took back what a right guess saves (one thread, 1M events: 0.152 s inlined, 0.158 not).
[[gnu::always_inline]] inline uint32_t known_run(RunCache& runs, const uint8_t* p, const uint8_t* end,
                                                 uint64_t context, bool add, const uint8_t** run_end) {
  uint32_t e = runs.guess(context, p, end, kAPPENDS, run_end);
  if (e == RunCache::kNone) e = runs.find_ending(p, end, kAPPENDS, run_end);
  if (e == RunCache::kNone) {
    const uint8_t* const q = memo_run_end(p, end);
    if (!q) return RunCache::kNone;
    *run_end = q;
    const size_t len = static_cast<size_t>(q - p);
    e = runs.find(p, len);
    if (e == RunCache::kNone && add) e = runs.add(p, len, nullptr, 0);
  }
  if (e != RunCache::kNone) runs.learn(context, e);
  return e;
}

// What a frame list's run is guessed from (RunCache::guess): the entry's first value, in PyTorch's files its action
// (a memo reference, or a short string's bytes). Only the fields its kind sets: the token's other fields are stale.
inline uint64_t run_context(const EntryToken& t) {
  switch (t.kind) {
    case EntryToken::kRef: return t.a;
    case EntryToken::kScalar: return t.b ^ uint64_t{t.x} << 56;
    case EntryToken::kStr: return (t.x ? t.b : 0) ^ uint64_t{t.a} << 32 ^ uint64_t{1} << 60;
    default: return uint64_t{t.a} ^ uint64_t{2} << 60;
  }
}

// Decodes the dict whose EMPTY_DICT sits just before `p`, of the shape
//   EMPTY_DICT <store> MARK (key value)+ SETITEMS
// where keys are strings (each maybe followed by a store) or memo references, and values are memo references,
// ints, None, booleans, strings, or a frame list `EMPTY_LIST <store> MARK <run> APPENDS <store>` whose run of memo
// references `find_run(run, &run_end, context)` recognises (its id, or RunCache::kNone; `context` is
// run_context's). False for any other shape: the caller then reads the dict the general way. Offsets are from
// `begin`.
template <class FindRun>
inline bool decode_entry(const uint8_t* p, const uint8_t* begin, const uint8_t* end, FindRun&& find_run,
                         DecodedEntry* d) {
  const uint8_t* q = p;
  const size_t dict_store = raw_store_len(q, end);
  if (end - q <= static_cast<ptrdiff_t>(dict_store) || q[dict_store] != kMARK) return false;
  d->at = static_cast<uint64_t>(p - begin);
  d->dict_store = static_cast<uint8_t>(dict_store);
  q += dict_store + 1;
  auto string = [&](EntryToken* t) {  // SHORT_BINUNICODE or BINUNICODE, then an optional memo store
    const size_t head = *q == kSHORT_BINUNICODE ? 2 : 5;
    if (end - q < static_cast<ptrdiff_t>(head)) return false;
    uint32_t n = q[1];
    if (head == 5) std::memcpy(&n, q + 1, 4);
    if (static_cast<uint64_t>(end - q) - head < n) return false;
    t->kind = EntryToken::kStr;
    t->a = n;
    t->b = static_cast<uint64_t>(q + head - begin);
    const uint8_t* const bytes = q + head;
    q += head + n;
    t->after = 0;
    t->x = 0;
    if (q < end && (*q == kMEMOIZE || *q == kBINPUT || *q == kLONG_BINPUT)) {
      const size_t len = raw_store_len(q, end);
      if (!len) return false;
      t->after = static_cast<uint8_t>(len);
      q += len;
    }
    // A short string travels in the token, so that the thread applying it need not read the input there (a line
    // another core has just read). Only where nothing else must be read there: no store, or a MEMOIZE.
    if (n <= 8 && t->after <= 1) {
      t->x = 1;
      t->b = 0;
      std::memcpy(&t->b, bytes, n);
    }
    return true;
  };
  size_t n = 0;
  for (;;) {
    if (q >= end) return false;
    if (*q == kSETITEMS) break;
    if (n == 2 * DecodedEntry::kPairs) return false;
    uint64_t idx;
    EntryToken& k = d->tok[n++];
    if (*q == kSHORT_BINUNICODE || *q == kBINUNICODE) {
      if (!string(&k)) return false;
    } else if (memo_ref(q, end, &idx)) {
      k.kind = EntryToken::kRef;
      k.a = static_cast<uint32_t>(idx);
    } else {
      return false;
    }
    if (q >= end) return false;
    EntryToken& v = d->tok[n++];
    auto scalar = [&v](Tag tag, uint64_t payload) {
      v.kind = EntryToken::kScalar;
      v.x = static_cast<uint8_t>(tag);
      v.b = payload;
    };
    switch (*q) {
      case kBINGET:
      case kLONG_BINGET:
        if (!memo_ref(q, end, &idx)) return false;
        v.kind = EntryToken::kRef;
        v.a = static_cast<uint32_t>(idx);
        break;
      case kBININT1:
        if (end - q < 2) return false;
        scalar(Tag::kInt, q[1]);
        q += 2;
        break;
      case kBININT2: {
        if (end - q < 3) return false;
        uint16_t x;
        std::memcpy(&x, q + 1, 2);
        scalar(Tag::kInt, x);
        q += 3;
        break;
      }
      case kBININT: {
        if (end - q < 5) return false;
        int32_t x;
        std::memcpy(&x, q + 1, 4);
        scalar(Tag::kInt, static_cast<uint64_t>(static_cast<int64_t>(x)));
        q += 5;
        break;
      }
      case kLONG1: {  // addresses and times: 1..8 bytes, little-endian two's complement
        if (end - q < 2 || q[1] == 0 || q[1] > 8 || end - q - 2 < q[1]) return false;
        scalar(Tag::kInt, static_cast<uint64_t>(small_long(q + 2, q[1], static_cast<size_t>(end - q - 2))));
        q += 2 + q[1];
        break;
      }
      case kNONE: scalar(Tag::kNone, 0); ++q; break;
      case kNEWTRUE: scalar(Tag::kBool, 1); ++q; break;
      case kNEWFALSE: scalar(Tag::kBool, 0); ++q; break;
      case kSHORT_BINUNICODE:
      case kBINUNICODE:
        if (!string(&v)) return false;
        break;
      case kEMPTY_LIST: {  // a frame list: EMPTY_LIST [store] MARK <a known run> APPENDS [store]
        const size_t before = raw_store_len(q + 1, end);
        if (end - q <= static_cast<ptrdiff_t>(before + 1) || q[before + 1] != kMARK) return false;
        const uint8_t* const run = q + before + 2;
        const uint8_t* run_end = nullptr;
        const uint32_t e = find_run(run, &run_end, n >= 3 ? run_context(d->tok[1]) : 0);
        const uint64_t at = static_cast<uint64_t>(run - begin);
        if (e == RunCache::kNone || e >= (1u << (64 - EntryToken::kRunShift)) || at > EntryToken::kOffsetMask)
          return false;
        v.kind = EntryToken::kList;
        v.x = static_cast<uint8_t>(before);
        v.a = static_cast<uint32_t>(run_end - run);
        v.b = at | uint64_t{e} << EntryToken::kRunShift;
        q = run_end + 1;
        v.after = static_cast<uint8_t>(raw_store_len(q, end));
        q += v.after;
        break;
      }
      default: return false;
    }
  }
  d->setitems = static_cast<uint64_t>(q - begin);
  d->n = static_cast<uint8_t>(n);
  return true;
}

}  // namespace allocscope::pickle::detail
