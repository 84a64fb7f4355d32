// A reduction's staging buffer at another batch. PyTorch sums a long column (a bias's gradient over the batch) by
// splitting it over several blocks, which leave partial sums in a global buffer (gpu_reduce_kernel, in
// ATen/native/cuda/Reduce.cuh: setReduceConfig picks the split). The buffer grows with the column's length until the
// blocks fill what the GPU runs at once, then stays; it appears only past 256 values a thread. Taking it as linear
// in the batch read an MLP at 4x its recorded batch 6.6% high on an H200 (tests/fixtures/plan_runs).
#include <algorithm>
#include <unordered_map>

#include "whatif/internal.h"

namespace allocscope::whatif_detail {

std::vector<StagingPair> staging_pairs(const DeviceLifetimes& lt, const std::vector<uint16_t>& flags) {
  // gpu_reduce_kernel allocates the buffer, then the semaphores (an int per column of blocks), from one stack.
  std::unordered_map<uint32_t, uint32_t> row_at;  // alloc event -> row, for the staging stacks' rows
  for (uint32_t i = 0; i < lt.count(); ++i)
    if ((flags_at(flags, lt.stack[i]) & kReduceStaging) && lt.alloc_event[i] != kNoEvent) row_at[lt.alloc_event[i]] = i;
  std::vector<StagingPair> pairs;
  std::vector<uint8_t> taken(lt.count(), 0);
  for (uint32_t i = 0; i < lt.count(); ++i) {
    if (!(flags_at(flags, lt.stack[i]) & kReduceStaging) || lt.alloc_event[i] == kNoEvent || taken[i]) continue;
    auto next = row_at.find(lt.alloc_event[i] + 1);
    if (next == row_at.end()) continue;
    const uint32_t j = next->second;
    if (lt.stack[j] != lt.stack[i] || lt.size[j] == 0 || lt.size[j] % 4 || lt.size[j] > lt.size[i]) continue;
    pairs.push_back({i, j});
    taken[i] = taken[j] = 1;
  }
  return pairs;
}

namespace {

// The recorded split of a column sum (the common reduction that stages much: the reduced dimension is not the
// fastest), from its buffer's and its semaphores' sizes, as setReduceConfig sizes them for a float accumulator:
// `v` outputs a thread (4, 2 or 1, as the outputs' count and alignment allow), `width` threads across the columns
// (32, or the power of two at or below outputs / v when fewer) and as many down them as make 512/v threads a block;
// `columns` = ceil(outputs / (v width)) columns of blocks, and the buffer is 4 B x outputs x blocks a column x width
// x v. Each reading whose numbers are whole and which this GPU could launch is tried, widest first; none (another
// kind of reduction, a double accumulator): unknown.
StagingBound solve(uint64_t buffer, uint64_t columns, uint64_t resident_threads) {
  auto floor_pow2 = [](uint64_t m) {
    uint64_t p = 1;
    while (p * 2 <= m) p *= 2;
    return p;
  };
  for (const uint64_t v : {4, 2, 1}) {
    for (const uint64_t width : {32, 16, 8, 4, 2, 1}) {
      if (buffer % (4 * width * v)) continue;
      const uint64_t product = buffer / (4 * width * v);  // outputs x blocks a column
      // m = outputs / v vectors across: ceil(m / width) = columns, and width = min(32, floor_pow2(m)).
      const uint64_t hi = width * columns, lo = width * (columns - 1) + 1;
      uint64_t ctas = 0;
      for (uint64_t m = hi; m >= lo && m > 0; --m) {
        if (std::min<uint64_t>(32, floor_pow2(m)) != width || product % (v * m)) continue;
        ctas = product / (v * m);  // the fewest blocks a column (the most growth left: never low)
        break;
      }
      if (ctas == 0) continue;
      // setReduceConfig: blocks_per_sm = max threads per SM / threads a block; target = SMs x that.
      const uint64_t target = resident_threads * v / 512;
      if (columns > target) continue;  // this GPU would not split the columns at all
      const uint64_t cap = (target + columns - 1) / columns;
      if (ctas > cap) continue;
      // Below the cap the split is the values each thread sums / 16, at least 16 (256 values a thread). At the cap,
      // how far below it the column's length reaches is unknown.
      if (ctas < 16 && ctas != cap) continue;
      return StagingBound{static_cast<float>(ctas), static_cast<float>(cap), ctas == cap};
    }
  }
  return {};
}

}  // namespace

std::vector<StagingBound> staging_bounds(const DeviceLifetimes& lt, const std::vector<uint16_t>& flags,
                                         uint64_t resident_threads) {
  std::vector<StagingBound> out(lt.count());
  if (resident_threads == 0) return out;
  for (const StagingPair& p : staging_pairs(lt, flags))
    out[p.buffer] = solve(lt.size[p.buffer], lt.size[p.semaphores] / 4, resident_threads);
  return out;
}

double staging_scale(const StagingBound& b, double factor) {
  if (b.ctas <= 0) return factor;  // its split unknown: as anything else that grows with the batch
  const double split = b.ctas * factor;  // the blocks a column by the values each thread sums
  // Past the cap the split stays, until each thread would sum over 256 values (setReduceConfig's ctas_per_output3).
  if (b.capped) return std::max<double>(b.cap, split / 16) / b.ctas;
  if (split < 16) return 0;  // under 256 values a thread: one block a column, no buffer
  return std::max(std::min<double>(b.cap, split), split / 16) / b.ctas;
}

}  // namespace allocscope::whatif_detail
