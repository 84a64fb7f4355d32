// A growable array of Values for the machine's stack, memo and container items (private to shared/src/pickle).
//
// Why not std::vector: every opcode pushes a Value, and GCC keeps std::vector::push_back out of line with a full
// register save even on its fast path (a quarter of the parse's instructions went there). Values are trivially
// copyable, so this array appends with one compare and one store, and grows out of line with operator new (which
// reaches the wasm build's out-of-memory handler like every other allocation).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "allocscope/pickle.h"

namespace allocscope::pickle::detail {

class ValueVec {
 public:
  static_assert(std::is_trivially_copyable_v<Value>);

  ValueVec() = default;
  ~ValueVec() { ::operator delete(data_); }
  ValueVec(const ValueVec&) = delete;
  ValueVec& operator=(const ValueVec&) = delete;
  ValueVec(ValueVec&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)), cap_(std::exchange(o.cap_, 0)) {}
  ValueVec& operator=(ValueVec&& o) noexcept {
    if (this != &o) {
      ::operator delete(data_);
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      cap_ = std::exchange(o.cap_, 0);
    }
    return *this;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return cap_; }
  Value* data() { return data_; }
  const Value* data() const { return data_; }
  Value* begin() { return data_; }
  Value* end() { return data_ + size_; }
  const Value* begin() const { return data_; }
  const Value* end() const { return data_ + size_; }
  Value& operator[](size_t i) { return data_[i]; }
  const Value& operator[](size_t i) const { return data_[i]; }
  Value& back() { return data_[size_ - 1]; }
  const Value& back() const { return data_[size_ - 1]; }
  operator std::span<const Value>() const { return {data_, size_}; }

  [[gnu::always_inline]] void push_back(const Value& v) {
    if (__builtin_expect(size_ == cap_, 0)) grow(size_ + 1);
    data_[size_++] = v;
  }
  void pop_back() { --size_; }
  // Appends [first, last), which must not point into this array.
  void append(const Value* first, const Value* last) {
    const size_t n = static_cast<size_t>(last - first);
    if (size_ + n > cap_) grow(size_ + n);
    if (n) std::memcpy(static_cast<void*>(data_ + size_), first, n * sizeof(Value));
    size_ += n;
  }
  // Grows by n values left for the caller to write (no zeroing), returning the first.
  Value* extend(size_t n) {
    if (size_ + n > cap_) grow(size_ + n);
    Value* out = data_ + size_;
    size_ += n;
    return out;
  }
  // Grows to n, filling new places with v (a memo store past the end leaves unset slots between).
  void grow_to(size_t n, const Value& v) {
    if (n > cap_) grow(n);
    while (size_ < n) data_[size_++] = v;
  }
  // Only ever shrinks (the machine cuts its stack back to a MARK).
  void truncate(size_t n) {
    if (n < size_) size_ = n;
  }
  void clear() { size_ = 0; }
  void reserve(size_t n) {
    if (n > cap_) grow(n);
  }
  void release() {
    ::operator delete(data_);
    data_ = nullptr;
    size_ = cap_ = 0;
  }

 private:
  [[gnu::noinline]] void grow(size_t need) {
    // A size whose byte count would not fit size_t (32 bits in wasm) fails like any allocation, never wraps.
    constexpr size_t kMaxCount = SIZE_MAX / sizeof(Value);
    if (need > kMaxCount) throw std::bad_alloc();
    size_t cap = cap_ < 8 ? 8 : cap_ > kMaxCount / 2 ? kMaxCount : cap_ * 2;
    if (cap < need) cap = need;
    Value* d = static_cast<Value*>(::operator new(cap * sizeof(Value)));
    if (size_) std::memcpy(static_cast<void*>(d), data_, size_ * sizeof(Value));
    ::operator delete(data_);
    data_ = d;
    cap_ = cap;
  }

  Value* data_ = nullptr;
  size_t size_ = 0;
  size_t cap_ = 0;
};

// The memo: values by slot, in fixed blocks of 16K slots (128 KB). A pickle stores a slot for nearly every object
// (a 10M-event snapshot: 20M slots, held until the load ends), and a doubling array sized for that copied itself on
// growth and needed up to twice the memory at once; in the browser, whose wasm heap never shrinks, the memo alone
// kept 600 MB. Blocks never move: growth allocates one block. A slot is 8 bytes: what a memo holds (string ids,
// handles, container references, small ints) packs as tag (4 bits), aux (28) and payload (32); anything else (a
// float, a big int, a generation past 2^28) goes to a side list that the slot points to.
class MemoTable {
 public:
  static constexpr unsigned kShift = 14;
  static constexpr size_t kBlock = size_t{1} << kShift;

  size_t size() const { return size_; }
  [[gnu::always_inline]] Value get(size_t i) const { return unpack(blocks_[i >> kShift][i & (kBlock - 1)]); }
  // Counts every change to a slot already stored (set, clear): a reader that remembers what some slots held (the
  // fast path's last keys) knows they still hold it while this has not moved. push_back changes no stored slot.
  uint64_t rewrites() const { return rewrites_; }
  void set(size_t i, const Value& v) {
    ++rewrites_;
    uint64_t& slot = blocks_[i >> kShift][i & (kBlock - 1)];
    slot = pack(v, (slot >> 60) == kSpill ? static_cast<uint32_t>(slot) : UINT32_MAX);
  }
  [[gnu::always_inline]] void push_back(const Value& v) {
    if (__builtin_expect(size_ == blocks_.size() << kShift, 0)) add_block();
    blocks_[size_ >> kShift][size_ & (kBlock - 1)] = pack(v, UINT32_MAX);
    ++size_;
  }
  void grow_to(size_t n, const Value& v) {
    while (size_ < n) push_back(v);
  }
  void clear() {  // keeps the blocks for the next load
    ++rewrites_;
    size_ = 0;
    spill_.clear();
  }
  void release() {
    ++rewrites_;
    blocks_.clear();
    spill_ = {};
    size_ = 0;
  }

 private:
  static constexpr uint64_t kSpill = 15;  // tag field of a slot whose value is in spill_
  static constexpr uint64_t kUnset = 14;  // tag field of an unset slot (Tag::kNone with aux kUnsetMemo)

  // `reuse`: the spill entry the slot already had (so re-setting a spilled slot does not grow the side list).
  // What fits a slot, as almost everything does, is packed inline: a call per store was 4% of a 1M-event load.
  [[gnu::always_inline]] uint64_t pack(const Value& v, uint32_t reuse) {
    const auto tag = static_cast<uint64_t>(v.tag);
    if (__builtin_expect(tag < kUnset && v.aux < (1u << 28) && v.payload <= UINT32_MAX, 1))  // unset: aux ~0u
      return tag << 60 | uint64_t{v.aux} << 32 | v.payload;
    return pack_rare(v, reuse);
  }
  [[gnu::noinline]] uint64_t pack_rare(const Value& v, uint32_t reuse) {
    if (v.tag == Tag::kNone && v.aux == 0xFFFFFFFFu) return kUnset << 60;
    uint32_t at = reuse;
    if (at == UINT32_MAX || at >= spill_.size()) {
      at = static_cast<uint32_t>(spill_.size());
      spill_.push_back(v);
    } else {
      spill_[at] = v;
    }
    return kSpill << 60 | at;
  }
  [[gnu::always_inline]] Value unpack(uint64_t slot) const {
    const uint64_t tag = slot >> 60;
    if (__builtin_expect(tag >= kUnset, 0))
      return tag == kUnset ? Value{Tag::kNone, 0xFFFFFFFFu, 0} : spill_[static_cast<uint32_t>(slot)];
    return Value{static_cast<Tag>(tag), static_cast<uint32_t>(slot >> 32) & ((1u << 28) - 1), slot & UINT32_MAX};
  }
  [[gnu::noinline]] void add_block() { blocks_.emplace_back(new uint64_t[kBlock]); }

  std::vector<std::unique_ptr<uint64_t[]>> blocks_;
  std::vector<Value> spill_;
  size_t size_ = 0;
  uint64_t rewrites_ = 0;
};

}  // namespace allocscope::pickle::detail
