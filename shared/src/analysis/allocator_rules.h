// PyTorch's CUDA caching allocator's size rules (c10/cuda/CUDACachingAllocator.cpp, default settings), in one place
// for every answer that reasons about blocks and segments: the what-if replay, the allocator state's block sizes and
// the OOM explainer (private to shared/src/analysis).
#pragma once

#include <cstdint>

namespace allocscope::detail {

constexpr uint64_t kMinBlockSize = 512;         // every request is rounded up to a multiple of this
constexpr uint64_t kSmallSize = 1ull << 20;      // requests up to this use the small pool; a large-pool block is
                                                 // split only when more than this remains
constexpr uint64_t kSmallBuffer = 2ull << 20;    // a small-pool segment
constexpr uint64_t kLargeBuffer = 20ull << 20;   // the segment for a large request under kMinLargeAlloc
constexpr uint64_t kMinLargeAlloc = 10ull << 20;
constexpr uint64_t kRoundLarge = 2ull << 20;     // larger requests get a segment of their size rounded to this

inline uint64_t round_size(uint64_t s) {
  return s < kMinBlockSize ? kMinBlockSize : (s + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}
// What the allocator asks cudaMalloc for when no cached block holds a (rounded) request.
inline uint64_t segment_size(uint64_t s) {
  if (s <= kSmallSize) return kSmallBuffer;
  if (s < kMinLargeAlloc) return kLargeBuffer;
  return (s + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

}  // namespace allocscope::detail
