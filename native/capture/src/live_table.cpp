// Open-addressing table of live allocations keyed by device address (see live_table.h).
#include "live_table.h"

namespace allocscope::capture {
namespace {
size_t pow2_at_least(size_t n) {
  size_t p = 16;
  while (p < n) p <<= 1;
  return p;
}
uint64_t mix(uint64_t a) {
  a ^= a >> 33;
  a *= 0xff51afd7ed558ccdull;
  a ^= a >> 33;
  return a;
}
}  // namespace

LiveTable::LiveTable(size_t reserve) : slots_(pow2_at_least(reserve * 2)) {}

size_t LiveTable::slot_of(uint64_t addr) const {
  const size_t mask = slots_.size() - 1;
  size_t i = mix(addr) & mask;
  while (slots_[i].addr && slots_[i].addr != addr) i = (i + 1) & mask;
  return i;
}

void LiveTable::put(const LiveEntry& e) {
  if (!e.addr) return;  // address 0 is never a live allocation
  size_t i = slot_of(e.addr);
  if (!slots_[i].addr) {
    ++count_;
    slots_[i] = e;
    if (count_ * 2 > slots_.size()) grow();
    return;
  }
  slots_[i] = e;
}

const LiveEntry* LiveTable::find(uint64_t addr) const {
  if (!addr) return nullptr;
  const size_t i = slot_of(addr);
  return slots_[i].addr ? &slots_[i] : nullptr;
}

bool LiveTable::take(uint64_t addr, LiveEntry* out) {
  if (!addr) return false;
  const size_t mask = slots_.size() - 1;
  size_t i = slot_of(addr);
  if (!slots_[i].addr) return false;
  if (out) *out = slots_[i];
  // Backward-shift deletion keeps probe chains intact without tombstones.
  size_t j = i;
  for (;;) {
    slots_[i].addr = 0;
    for (;;) {
      j = (j + 1) & mask;
      if (!slots_[j].addr) {
        --count_;
        return true;
      }
      const size_t home = mix(slots_[j].addr) & mask;
      // Move slots_[j] into the hole at i when its home is not cyclically in (i, j].
      const bool between = i <= j ? (home > i && home <= j) : (home > i || home <= j);
      if (!between) break;
    }
    slots_[i] = slots_[j];
    i = j;
  }
}

void LiveTable::grow() {
  std::vector<LiveEntry> old;
  old.swap(slots_);
  slots_.assign(old.size() * 2, LiveEntry{});
  count_ = 0;
  for (const LiveEntry& e : old)
    if (e.addr) put(e);
}

void LiveTable::clear() {
  for (LiveEntry& e : slots_) e = LiveEntry{};
  count_ = 0;
}

}  // namespace allocscope::capture
