// Open-addressing hash table over flat return-address arrays (see stack_interner.h).
#include "stack_interner.h"

#include <cstring>

namespace allocscope::capture {

StackInterner::StackInterner() {
  ips_.reserve(1 << 16);
  offsets_.reserve(1 << 12);
  hashes_.reserve(1 << 12);
  offsets_.push_back(0);
  offsets_.push_back(0);  // stack 0: empty
  hashes_.push_back(0);
  buckets_.assign(1 << 13, 0);
}

uint64_t StackInterner::hash(const uintptr_t* ips, int n) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ static_cast<uint64_t>(n);
  for (int i = 0; i < n; ++i) {
    h ^= ips[i];
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  return h | 1;  // never 0
}

uint32_t StackInterner::intern(const uintptr_t* ips, int n, uint64_t h) {
  if (n <= 0) return 0;
  const size_t mask = buckets_.size() - 1;
  size_t b = h & mask;
  for (;; b = (b + 1) & mask) {
    const uint32_t id = buckets_[b];
    if (id == 0) break;
    if (hashes_[id] == h && offsets_[id + 1] - offsets_[id] == static_cast<uint32_t>(n) &&
        std::memcmp(ips_.data() + offsets_[id], ips, sizeof(uintptr_t) * n) == 0)
      return id;
  }
  const uint32_t id = size();
  ips_.insert(ips_.end(), ips, ips + n);
  offsets_.push_back(static_cast<uint32_t>(ips_.size()));
  hashes_.push_back(h);
  buckets_[b] = id;
  if (size_t(size()) * 2 > buckets_.size()) rehash(buckets_.size() * 2);
  return id;
}

void StackInterner::rehash(size_t nb) {
  buckets_.assign(nb, 0);
  const size_t mask = nb - 1;
  for (uint32_t id = 1; id < size(); ++id) {
    size_t b = hashes_[id] & mask;
    while (buckets_[b]) b = (b + 1) & mask;
    buckets_[b] = id;
  }
}

}  // namespace allocscope::capture
