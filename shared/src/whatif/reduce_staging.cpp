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
// x v. Every reading whose numbers are whole and which this GPU could launch is kept (a 64-wide sum of 512 blocks
// reads as 128 outputs of 128 blocks too); one past the cap only where no other is. The reduction's output is
// allocated just before its buffer: where its size (4 or 2 bytes an output) agrees with some readings, only they are
// kept, of the most outputs a thread (1000 outputs of 16 blocks also read as 500 of 64, which would stage at half the
// batch where none is; a bf16 output of 2000 bytes agrees with both).
StagingBound solve(uint64_t buffer, uint64_t columns, uint64_t resident_threads, uint64_t output_bytes) {
  auto floor_pow2 = [](uint64_t m) {
    uint64_t p = 1;
    while (p * 2 <= m) p *= 2;
    return p;
  };
  StagingBound below, past, below_sized, past_sized;  // readings at or below the cap, and past it; of the output's size
  uint64_t sized_v = 0;                                // the outputs a thread of the readings of the output's size
  for (const uint64_t v : {4, 2, 1}) {
    // setReduceConfig: blocks_per_sm = max threads per SM / threads a block; target = SMs x that.
    const uint64_t target = resident_threads * v / 512;
    if (columns == 0 || columns > target) continue;  // this GPU would not split the columns at all
    const uint64_t cap = (target + columns - 1) / columns;
    for (const uint64_t width : {32, 16, 8, 4, 2, 1}) {
      if (buffer % (4 * width * v)) continue;
      const uint64_t product = buffer / (4 * width * v);  // outputs x blocks a column
      // m = outputs / v vectors across: ceil(m / width) = columns, and width = min(32, floor_pow2(m)).
      for (uint64_t m = width * columns, lo = width * (columns - 1) + 1; m >= lo && m > 0; --m) {
        if (std::min<uint64_t>(32, floor_pow2(m)) != width || product % (v * m)) continue;
        const uint64_t ctas = product / (v * m);
        // setReduceConfig's ctas_per_output = max(min(cap, values a thread / 16), values a thread / 256). Below the
        // cap the split asked for is what was recorded, and at least 16 (256 values a thread); past it, each thread
        // sums over 256 values and the recording is a sixteenth of it. At the cap the split asked for lies between
        // the cap and 16 times it: the largest is taken, which never predicts a buffer smaller than it is (from 66
        // blocks at batch 8192, a 4096-wide sum at 32x reads 2112 blocks where PyTorch took 256).
        if (ctas < cap && ctas < 16) continue;
        const float split = static_cast<float>(ctas < cap ? ctas : 16 * ctas);
        const uint64_t outputs = v * m;
        const bool sized = output_bytes && (output_bytes == 4 * outputs || output_bytes == 2 * outputs) &&
                           (sized_v == 0 || sized_v == v);
        if (sized) sized_v = v;
        for (StagingBound* into : {ctas > cap ? &past : &below, sized ? (ctas > cap ? &past_sized : &below_sized) : nullptr})
          if (into && into->readings < StagingBound::kMax)
            into->reading[into->readings++] = {static_cast<float>(ctas), split, static_cast<float>(cap)};
      }
    }
  }
  if (below_sized.readings) return below_sized;
  if (past_sized.readings) return past_sized;
  return below.readings ? below : past;
}

}  // namespace

std::vector<StagingBound> staging_bounds(const DeviceLifetimes& lt, const std::vector<uint16_t>& flags,
                                         uint64_t resident_threads) {
  std::vector<StagingBound> out(lt.count());
  if (resident_threads == 0) return out;
  const std::vector<StagingPair> pairs = staging_pairs(lt, flags);
  std::unordered_map<uint32_t, uint32_t> row_at;  // alloc event -> row, for the event before each buffer
  for (const StagingPair& p : pairs)
    if (lt.alloc_event[p.buffer] > 0) row_at[lt.alloc_event[p.buffer] - 1] = UINT32_MAX;
  for (uint32_t i = 0; i < lt.count(); ++i)
    if (auto f = row_at.find(lt.alloc_event[i]); f != row_at.end() && lt.alloc_event[i] != kNoEvent) f->second = i;
  for (const StagingPair& p : pairs) {
    auto before = lt.alloc_event[p.buffer] > 0 ? row_at.find(lt.alloc_event[p.buffer] - 1) : row_at.end();
    const uint64_t output = before != row_at.end() && before->second != UINT32_MAX ? lt.size[before->second] : 0;
    out[p.buffer] = solve(lt.size[p.buffer], lt.size[p.semaphores] / 4, resident_threads, output);
  }
  return out;
}

double staging_scale(const StagingBound& b, double factor) {
  if (b.readings == 0) return factor;  // its split unknown: as anything else that grows with the batch
  double scale = 0;
  for (int k = 0; k < b.readings; ++k) {
    const StagingReading& r = b.reading[k];
    const double split = r.split * factor;  // the blocks a column the values each thread sums ask for
    if (split < 16) continue;  // under 256 values a thread: one block a column, no buffer
    // Up to the cap, then each thread sums over 256 values (setReduceConfig's ctas_per_output3).
    scale = std::max(scale, std::max(std::min<double>(r.cap, split), split / 16) / r.ctas);
  }
  return scale;
}

}  // namespace allocscope::whatif_detail
