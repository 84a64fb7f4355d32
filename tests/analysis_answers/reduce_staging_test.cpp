// Reductions' staging buffers at another batch (shared/src/whatif/reduce_staging.cpp), against what PyTorch itself
// allocated: MLPs recorded on an H200 at batch 256 to 2048 (tests/fixtures/whatif), whose bias gradients are summed
// over the batch by gpu_reduce_kernel, and one at 8192 measured (tests/fixtures/plan_runs: the MLP at 4x its batch).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "allocscope/gpu_sizes.h"
#include "allocscope/lifetimes.h"
#include "allocscope/loader.h"
#include "whatif/internal.h"

namespace allocscope::whatif_detail {
namespace {

struct Recorded {
  Snapshot s;
  DeviceLifetimes lt;
  std::vector<uint16_t> flags;
};
Recorded load(const std::string& name) {
  auto r = load_snapshot_file(std::string(ALLOCSCOPE_FIXTURES) + "/whatif/" + name + ".pickle.gz");
  EXPECT_TRUE(r.ok()) << name;
  Recorded out;
  if (!r.ok()) return out;
  out.s = std::move(r).value();
  out.lt = build_device_lifetimes(out.s, 0);
  out.flags = stack_flags(out.s, out.lt);
  return out;
}

// The staging buffers' sizes, in the order they were allocated.
std::vector<uint64_t> buffers(const Recorded& r) {
  std::vector<StagingPair> pairs = staging_pairs(r.lt, r.flags);
  std::sort(pairs.begin(), pairs.end(),
            [&](const StagingPair& a, const StagingPair& b) { return r.lt.alloc_event[a.buffer] < r.lt.alloc_event[b.buffer]; });
  std::vector<uint64_t> out;
  for (const StagingPair& p : pairs) out.push_back(r.lt.size[p.buffer]);
  return out;
}

const uint64_t kH200 = parse_gpu_capacity("h200").value().resident_threads;

TEST(ReduceStaging, EachBufferPairsWithItsSemaphores) {
  const Recorded r = load("mlp_adamw_b2048");
  // Three steps of four linear layers' bias gradients: 64 MiB for the 4096-wide ones, 15.6 MiB for the 1000-wide
  // head; their semaphores are an int per 32 columns (128 and 32 bytes).
  const std::vector<StagingPair> pairs = staging_pairs(r.lt, r.flags);
  ASSERT_EQ(pairs.size(), 12u);
  for (const StagingPair& p : pairs) {
    EXPECT_EQ(r.lt.size[p.semaphores], r.lt.size[p.buffer] == 67108864 ? 128u : 32u) << r.lt.size[p.buffer];
    EXPECT_EQ(r.lt.alloc_event[p.semaphores], r.lt.alloc_event[p.buffer] + 1);
  }
}

TEST(ReduceStaging, ScaledFromOneBatchAreTheBuffersPyTorchAllocatedAtAnother) {
  for (const char* job : {"mlp_adamw", "mlp_sgd_amp"}) {
    const Recorded b512 = load(std::string(job) + "_b512"), b1024 = load(std::string(job) + "_b1024"),
                   b2048 = load(std::string(job) + "_b2048");
    const std::vector<StagingBound> bounds = staging_bounds(b1024.lt, b1024.flags, kH200);
    std::vector<StagingPair> pairs = staging_pairs(b1024.lt, b1024.flags);
    std::sort(pairs.begin(), pairs.end(), [&](const StagingPair& a, const StagingPair& b) {
      return b1024.lt.alloc_event[a.buffer] < b1024.lt.alloc_event[b.buffer];
    });
    std::vector<uint64_t> at_twice, at_half;
    for (const StagingPair& p : pairs) {
      ASSERT_GT(bounds[p.buffer].ctas, 0) << job << ": the split of a " << b1024.lt.size[p.buffer] << " B buffer";
      const uint64_t size = b1024.lt.size[p.buffer];
      at_twice.push_back(scaled(size, staging_scale(bounds[p.buffer], 2.0)));
      if (const uint64_t half = scaled(size, staging_scale(bounds[p.buffer], 0.5))) at_half.push_back(half);
    }
    EXPECT_EQ(at_twice, buffers(b2048)) << job;
    EXPECT_EQ(at_half, buffers(b512)) << job << ": at batch 512 no column has 256 values a thread";
    // Linear, as before, where the GPU is unknown.
    const std::vector<StagingBound> unknown = staging_bounds(b1024.lt, b1024.flags, 0);
    for (const StagingPair& p : pairs) EXPECT_EQ(staging_scale(unknown[p.buffer], 0.5), 0.5);
  }
}

TEST(ReduceStaging, StopsGrowingWhereTheGpuHasNoMoreBlocks) {
  // A 4096-wide bias at batch 2048 is split over 32 blocks a column, 32 columns of blocks; an H200 runs 132 SMs x
  // 16 blocks of 128 threads: 66 a column at most. At 8192 it would be 128: the buffer stays at 66/32 of its size,
  // what makes the plan_runs MLP at 4x its batch read 1.000 (1.066 when linear).
  const Recorded r = load("mlp_adamw_b2048");
  const std::vector<StagingBound> bounds = staging_bounds(r.lt, r.flags, kH200);
  for (const StagingPair& p : staging_pairs(r.lt, r.flags)) {
    const StagingBound& b = bounds[p.buffer];
    if (r.lt.size[p.buffer] != 67108864) continue;
    EXPECT_EQ(b.ctas, 32);
    EXPECT_EQ(b.cap, 66);
    EXPECT_FALSE(b.capped);
    EXPECT_DOUBLE_EQ(staging_scale(b, 4.0), 66.0 / 32);
    EXPECT_DOUBLE_EQ(staging_scale(b, 64.0), 128.0 / 32);  // each thread past 256 values: ctas_per_output3
  }
  // A smaller GPU caps it sooner: an RTX 4090 runs 128 SMs x 12 such blocks, 48 a column.
  const std::vector<StagingBound> ada = staging_bounds(r.lt, r.flags, parse_gpu_capacity("rtx4090").value().resident_threads);
  for (const StagingPair& p : staging_pairs(r.lt, r.flags))
    if (r.lt.size[p.buffer] == 67108864) EXPECT_EQ(ada[p.buffer].cap, 48);
}

}  // namespace
}  // namespace allocscope::whatif_detail
