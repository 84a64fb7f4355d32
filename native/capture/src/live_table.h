// The live allocations (address -> what was allocated there), from which the dump's `segments` list is built.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace allocscope::capture {

enum class SegmentKind : uint8_t { kPlain, kManaged, kAsync, kMapped };

struct LiveEntry {
  uint64_t addr = 0;  // 0 = empty slot
  uint64_t size = 0;
  int64_t stream = 0;
  int64_t time_us = 0;
  uint64_t pool = 0;
  uint32_t stack = 0;
  uint32_t context = 0;
  uint32_t meta = 0;  // the allocating event's metadata key (api, nvtx path)
  int16_t device = 0;
  SegmentKind kind = SegmentKind::kPlain;
};

// Linear probing with backward-shift deletion; not thread-safe (used under the recorder's lock). Reserved up front;
// grows (allocates) only past half load.
class LiveTable {
 public:
  explicit LiveTable(size_t reserve = 1 << 14);
  void put(const LiveEntry& e);                 // replaces an entry at the same address
  bool take(uint64_t addr, LiveEntry* out);     // removes and returns it
  const LiveEntry* find(uint64_t addr) const;
  size_t size() const { return count_; }
  template <typename F> void for_each(F f) const {
    for (const LiveEntry& e : slots_) if (e.addr) f(e);
  }
  void clear();

 private:
  size_t slot_of(uint64_t addr) const;
  void grow();
  std::vector<LiveEntry> slots_;
  size_t count_ = 0;
};

}  // namespace allocscope::capture
