// A flat open-addressing map from 64-bit addresses to 32-bit row indices, for replays that touch every event.
#pragma once

#include <cstdint>
#include <vector>

namespace allocscope::detail {

class AddrMap {
 public:
  static constexpr uint32_t kAbsent = UINT32_MAX;

  explicit AddrMap(size_t expected = 1024) {
    size_t cap = 16;
    while (cap < expected * 2) cap <<= 1;
    keys_.assign(cap, 0);
    vals_.assign(cap, kAbsent);
  }

  uint32_t get(uint64_t key) const {
    for (size_t i = slot(key);; i = (i + 1) & mask()) {
      if (vals_[i] == kAbsent) return kAbsent;
      if (keys_[i] == key && vals_[i] != kTomb) return vals_[i];
    }
  }

  void put(uint64_t key, uint32_t val) {
    if ((used_ + 1) * 4 > keys_.size() * 3) grow();
    size_t tomb = SIZE_MAX;
    for (size_t i = slot(key);; i = (i + 1) & mask()) {
      if (vals_[i] == kAbsent) {
        size_t at = tomb != SIZE_MAX ? tomb : i;
        if (at == i) ++used_;
        keys_[at] = key;
        vals_[at] = val;
        return;
      }
      if (vals_[i] == kTomb) {
        if (tomb == SIZE_MAX) tomb = i;
      } else if (keys_[i] == key) {
        vals_[i] = val;
        return;
      }
    }
  }

  // Removes `key`; returns its value or kAbsent.
  uint32_t erase(uint64_t key) {
    for (size_t i = slot(key);; i = (i + 1) & mask()) {
      if (vals_[i] == kAbsent) return kAbsent;
      if (vals_[i] != kTomb && keys_[i] == key) {
        uint32_t v = vals_[i];
        vals_[i] = kTomb;  // tombstones keep probe chains intact; grow() drops them
        return v;
      }
    }
  }

  template <typename F>
  void for_each(F&& f) const {
    for (size_t i = 0; i < keys_.size(); ++i)
      if (vals_[i] != kAbsent && vals_[i] != kTomb) f(keys_[i], vals_[i]);
  }

 private:
  static constexpr uint32_t kTomb = UINT32_MAX - 1;
  size_t mask() const { return keys_.size() - 1; }
  size_t slot(uint64_t key) const {
    uint64_t x = key ^ (key >> 29);
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 32;
    return static_cast<size_t>(x) & mask();
  }
  void grow() {
    std::vector<uint64_t> k = std::move(keys_);
    std::vector<uint32_t> v = std::move(vals_);
    size_t live = 0;
    for (uint32_t x : v) live += (x != kAbsent && x != kTomb);
    size_t cap = 16;
    while (cap < (live + 1) * 4) cap <<= 1;
    keys_.assign(cap, 0);
    vals_.assign(cap, kAbsent);
    used_ = 0;
    for (size_t i = 0; i < k.size(); ++i)
      if (v[i] != kAbsent && v[i] != kTomb) put(k[i], v[i]);
  }
  std::vector<uint64_t> keys_;
  std::vector<uint32_t> vals_;
  size_t used_ = 0;  // slots not kAbsent (live + tombstones)
};

}  // namespace allocscope::detail
