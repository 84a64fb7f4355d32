// Capture-time stack interning: identical return-address lists share one id, so an event stores 4 bytes, not a stack.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace allocscope::capture {

// Not thread-safe: the recorder calls it under its lock (after unwinding, which happens outside the lock).
// Storage is reserved up front and grows geometrically, so a hook rarely allocates.
class StackInterner {
 public:
  StackInterner();
  static uint64_t hash(const uintptr_t* ips, int n);
  // Id of the stack (0 for the empty stack).
  uint32_t intern(const uintptr_t* ips, int n, uint64_t hash);
  std::span<const uintptr_t> get(uint32_t id) const {
    return {ips_.data() + offsets_[id], offsets_[id + 1] - offsets_[id]};
  }
  uint32_t size() const { return static_cast<uint32_t>(offsets_.size() - 1); }

 private:
  void rehash(size_t buckets);
  std::vector<uintptr_t> ips_;
  std::vector<uint32_t> offsets_;  // size()+1 entries
  std::vector<uint64_t> hashes_;
  std::vector<uint32_t> buckets_;  // id, 0 = empty (id 0 is never stored: the empty stack is answered directly)
};

}  // namespace allocscope::capture
