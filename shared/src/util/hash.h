// Small, fast non-cryptographic hashing for interning tables (private to shared/).
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace allocscope::detail {

inline uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

inline uint64_t hash_bytes(const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = 0x9e3779b97f4a7c15ULL ^ (n * 0x100000001b3ULL);
  // Multiply-rotate per word (cheap: stacks hash dozens of words per trace entry); mix64 at the end spreads it.
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * 0x9e3779b97f4a7c15ULL;
    h = (h << 31) | (h >> 33);
    p += 8;
    n -= 8;
  }
  uint64_t tail = 0;
  if (n) std::memcpy(&tail, p, n);  // p may be null when n == 0 (the empty stack)
  return mix64(h ^ tail ^ (static_cast<uint64_t>(n) << 56));  // size_t is 32-bit in wasm
}

inline uint64_t hash_string(std::string_view s) { return hash_bytes(s.data(), s.size()); }

}  // namespace allocscope::detail
