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

// The memo: values by slot, in fixed blocks of 16K slots (256 KB). A pickle stores a slot for nearly every object
// (a 10M-event snapshot: 20M slots), and a doubling array sized for that copied itself on growth and needed up to
// twice the memory at once; in the browser, whose wasm heap never shrinks, the memo alone kept 600 MB. Blocks never
// move: growth allocates one block, and a slot costs its 16 bytes.
class MemoTable {
 public:
  static constexpr unsigned kShift = 14;
  static constexpr size_t kBlock = size_t{1} << kShift;

  size_t size() const { return size_; }
  Value& operator[](size_t i) { return blocks_[i >> kShift][i & (kBlock - 1)]; }
  const Value& operator[](size_t i) const { return blocks_[i >> kShift][i & (kBlock - 1)]; }
  [[gnu::always_inline]] void push_back(const Value& v) {
    if (__builtin_expect(size_ == blocks_.size() << kShift, 0)) add_block();
    (*this)[size_++] = v;
  }
  void grow_to(size_t n, const Value& v) {
    while (size_ < n) push_back(v);
  }
  void clear() { size_ = 0; }  // keeps the blocks for the next load
  void release() {
    blocks_.clear();
    size_ = 0;
  }

 private:
  [[gnu::noinline]] void add_block() { blocks_.emplace_back(new Value[kBlock]); }

  std::vector<std::unique_ptr<Value[]>> blocks_;
  size_t size_ = 0;
};

}  // namespace allocscope::pickle::detail
