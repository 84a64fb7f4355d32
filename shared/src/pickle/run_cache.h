// A cache of "runs of memo references" (private to shared/src/pickle).
//
// Every trace entry carries its frame list as `EMPTY_LIST MARK (BINGET|LONG_BINGET)... APPENDS`, and the same stack
// produces the same bytes each time (its frames are memoized once, at first use). In the 1M-event fixture 36M
// references form only a few hundred distinct runs. The cache maps a run's exact bytes to the values they decode to
// and, once the consumer has turned such a list into a handle under some dict key, to that handle too, so a repeated
// stack costs one hash and one memcmp instead of decoding, validating, copying and interning every frame.
//
// Why it is exact: a run is cached only after every slot it references held a scalar or handle. Such a slot changes
// only when the pickle stores into an existing memo index (real pickles never do), and any such store disables
// lookups for the rest of the file. A cached consumer answer depends only on the list's values and its key (the
// Consumer contract in pickle.h), which the entry records.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "allocscope/pickle.h"

namespace allocscope::pickle::detail {

class RunCache {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;
  // Runs shorter than this are cheaper to decode than to look up.
  static constexpr size_t kMinLength = 8;

  void reset() {
    guesses_.assign(kGuessSlots, kNone);
    last_ = kNone;
    head_.assign(kBuckets, kNone);
    entries_.clear();
    bytes_.clear();
    values_.clear();
    disabled_ = false;
    max_len_ = 0;
  }
  // A memo slot that may be in a cached run was overwritten: cached bytes no longer decode to cached values.
  void disable() { disabled_ = true; }
  bool disabled() const { return disabled_; }

  // The entry for exactly the run [p, p + len), or kNone.
  uint32_t find(const uint8_t* p, size_t len) const {
    if (disabled_ || head_.empty() || len < kMinLength) return kNone;
    const uint64_t h = hash(p, len);
    for (uint32_t e = head_[h & (kBuckets - 1)]; e != kNone; e = entries_[e].next) {
      const Entry& en = entries_[e];
      if (en.hash == h && en.len == len && same_bytes(p, bytes_.data() + en.bytes, len)) return e;
    }
    return kNone;
  }

  // The cached run that starts at `p` and ends where the byte `terminator` follows it, without walking its opcodes:
  // each `terminator` byte in [p, end), nearest first, up to the longest cached run's length, is tried as the end
  // (at most kTries of them). It is exact: a hit's bytes are a cached run's, whose opcodes were all walked when it
  // was added, so a walk from `p` would reach the same boundary and stop at the same `terminator`. An earlier
  // `terminator` byte inside an argument only costs a lookup that misses. kNone when none is found this way (the
  // caller then walks the opcodes, as before).
  uint32_t find_ending(const uint8_t* p, const uint8_t* end, uint8_t terminator, const uint8_t** at) const {
    if (disabled_ || entries_.empty()) return kNone;
    static_assert(std::endian::native == std::endian::little, "the 8-byte search takes the lowest byte first");
    if (end - p > static_cast<ptrdiff_t>(max_len_)) end = p + max_len_ + 1;  // no cached run is longer
    const uint8_t* q = p + kMinLength;
    constexpr uint64_t kOnes = 0x0101010101010101ull, kHighs = 0x8080808080808080ull;
    const uint64_t pattern = kOnes * terminator;
    for (int tries = 0; tries < kTries;) {
      // Eight bytes at a time: the lowest byte equal to `terminator` is the lowest zero byte of w (exact; the
      // borrow can only flag bytes above it). Little-endian, as x86 and WebAssembly are.
      const uint8_t* hit = nullptr;
      for (; end - q >= 8; q += 8) {
        uint64_t w;
        std::memcpy(&w, q, 8);
        w ^= pattern;
        if (const uint64_t m = (w - kOnes) & ~w & kHighs) {
          hit = q + (__builtin_ctzll(m) >> 3);
          break;
        }
      }
      if (!hit)
        for (; q < end; ++q)
          if (*q == terminator) {
            hit = q;
            break;
          }
      if (!hit) return kNone;
      if (const uint32_t e = find(p, static_cast<size_t>(hit - p)); e != kNone) {
        *at = hit;
        return e;
      }
      q = hit + 1;
      ++tries;
    }
    return kNone;
  }

  // A guess at the cached run that starts at `p`: the one that came after the last run found (learn) the last time
  // that run came in the same `context` (the trace entry's action). A trace's stacks follow one another in patterns
  // (a layer's alloc, its free, the next layer's alloc): on the 1M-event fixture 87% of the guesses are right, and
  // a right one costs one comparison of the run's bytes instead of a search for its end, a hash and the comparison.
  // Exact as find_ending is: a hit is a cached run's bytes followed by `terminator`, which is where an opcode walk
  // from `p` would stop (a cached run is whole BINGET/LONG_BINGET opcodes). kNone for a wrong guess.
  uint32_t guess(uint64_t context, const uint8_t* p, const uint8_t* end, uint8_t terminator,
                 const uint8_t** at) const {
    if (disabled_ || guesses_.empty()) return kNone;
    const uint32_t e = guesses_[guess_slot(context)];
    if (e >= entries_.size()) return kNone;
    const Entry& en = entries_[e];
    if (end - p <= static_cast<ptrdiff_t>(en.len) || p[en.len] != terminator ||
        !same_bytes(p, bytes_.data() + en.bytes, en.len))
      return kNone;
    *at = p + en.len;
    return e;
  }
  // The run `e` was found where `context` held (however it was found): the next guess there, and the run the next
  // guess follows.
  void learn(uint64_t context, uint32_t e) {
    if (guesses_.empty()) return;
    guesses_[guess_slot(context)] = e;
    last_ = e;
  }

  // Remembers the run [p, p + len) decoding to `vals`; returns its entry or kNone when full or not worth it.
  uint32_t add(const uint8_t* p, size_t len, const Value* vals, size_t count) {
    if (disabled_ || len < kMinLength || entries_.size() >= kMaxEntries || bytes_.size() + len > kMaxBytes ||
        values_.size() + count > kMaxValues)
      return kNone;
    if (head_.empty()) reset();
    Entry en;
    en.hash = hash(p, len);
    en.next = head_[en.hash & (kBuckets - 1)];
    en.bytes = static_cast<uint32_t>(bytes_.size());
    en.len = static_cast<uint32_t>(len);
    en.values = static_cast<uint32_t>(values_.size());
    en.count = static_cast<uint32_t>(count);
    bytes_.insert(bytes_.end(), p, p + len);
    values_.insert(values_.end(), vals, vals + count);
    const uint32_t e = static_cast<uint32_t>(entries_.size());
    head_[en.hash & (kBuckets - 1)] = e;
    entries_.push_back(en);
    max_len_ = std::max(max_len_, len);
    return e;
  }

  size_t byte_length(uint32_t e) const { return entries_[e].len; }
  size_t count(uint32_t e) const { return entries_[e].count; }
  const Value* values(uint32_t e) const { return values_.data() + entries_[e].values; }

  // The consumer's earlier answer for this run's list under `key`, if any.
  bool answer(uint32_t e, const Value& key, Value* out) const {
    if (e >= entries_.size()) return false;
    const Entry& en = entries_[e];
    if (!en.answered || !same(en.key, key)) return false;
    *out = en.answer;
    return true;
  }
  void remember(uint32_t e, const Value& key, const Value& answer) {
    if (e >= entries_.size() || key.is_container()) return;
    Entry& en = entries_[e];
    en.key = key;
    en.answer = answer;
    en.answered = true;
  }

 private:
  static constexpr size_t kBuckets = 4096;
  static constexpr int kTries = 4;  // terminator bytes tried as a run's end before the caller walks it
  static constexpr unsigned kGuessBits = 12;
  static constexpr size_t kGuessSlots = size_t{1} << kGuessBits;  // (last run, context) -> the run that followed
  static constexpr size_t kMaxEntries = 1u << 16;
  // Bounded whatever the input: at most 4 MiB of run bytes and 8 MiB of values (a few thousand distinct stacks).
  static constexpr size_t kMaxBytes = 4u << 20;
  static constexpr size_t kMaxValues = 512u << 10;

  struct Entry {
    uint64_t hash = 0;
    uint32_t next = kNone;
    uint32_t bytes = 0, len = 0;
    uint32_t values = 0, count = 0;
    bool answered = false;
    Value key;
    Value answer;
  };

  static bool same(const Value& a, const Value& b) {
    return a.tag == b.tag && a.aux == b.aux && a.payload == b.payload;
  }
  // Equality eight bytes at a time: the wasm build's memcmp compares byte by byte, and every hit compares a whole run.
  static bool same_bytes(const uint8_t* a, const uint8_t* b, size_t len) {
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
      uint64_t x, y;
      std::memcpy(&x, a + i, 8);
      std::memcpy(&y, b + i, 8);
      if (x != y) return false;
    }
    for (; i < len; ++i)
      if (a[i] != b[i]) return false;
    return true;
  }

  // Not a hash of every byte: the length and the bytes at both ends already tell distinct stacks apart (their
  // innermost and outermost frames differ), and memcmp confirms every hit.
  static uint64_t hash(const uint8_t* p, size_t len) {
    uint64_t a, b, c;
    std::memcpy(&a, p, 8);  // len >= kMinLength = 8
    std::memcpy(&b, p + (len >= 16 ? len / 2 - 4 : 0), 8);
    std::memcpy(&c, p + len - 8, 8);
    uint64_t h = (len * 0x9E3779B97F4A7C15ull) ^ a;
    h = (h ^ h >> 32) * 0xC2B2AE3D27D4EB4Full ^ b;
    h = (h ^ h >> 29) * 0x165667B19E3779F9ull ^ c;
    return h ^ h >> 32;
  }

  size_t guess_slot(uint64_t context) const {
    return static_cast<size_t>(((uint64_t{last_} * 0x9E3779B97F4A7C15ull) ^ context) * 0xC2B2AE3D27D4EB4Full >>
                               (64 - kGuessBits));
  }

  std::vector<uint32_t> guesses_;
  uint32_t last_ = kNone;  // the run found last (learn)
  std::vector<uint32_t> head_;
  std::vector<Entry> entries_;
  std::vector<uint8_t> bytes_;
  std::vector<Value> values_;
  bool disabled_ = false;
  size_t max_len_ = 0;  // the longest cached run: find_ending looks no further
};

}  // namespace allocscope::pickle::detail
