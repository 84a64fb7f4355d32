// Reductions' staging buffers at another batch (shared/src/whatif/reduce_staging.cpp), against what PyTorch itself
// allocated: MLPs recorded on an H100 at batch 256 to 2048 (tests/fixtures/whatif), whose bias gradients are summed
// over the batch by gpu_reduce_kernel, and column sums of 36 shapes recorded on an H200 (tests/fixtures/reduce_staging).
// Both GPUs run 132 SMs x 2048 threads.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
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
Recorded load(const std::string& name, const std::string& dir = "whatif") {
  auto r = load_snapshot_file(std::string(ALLOCSCOPE_FIXTURES) + "/" + dir + "/" + name + ".pickle.gz");
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

const uint64_t kH200 = parse_gpu_capacity("h200").value().resident_threads;  // an H100 SXM's too

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
      ASSERT_GT(bounds[p.buffer].readings, 0) << job << ": the split of a " << b1024.lt.size[p.buffer] << " B buffer";
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
    if (r.lt.size[p.buffer] != 67108864) continue;
    const StagingBound& b = bounds[p.buffer];
    ASSERT_EQ(b.readings, 1);
    EXPECT_EQ(b.reading[0].ctas, 32);
    EXPECT_EQ(b.reading[0].split, 32);
    EXPECT_EQ(b.reading[0].cap, 66);
    EXPECT_DOUBLE_EQ(staging_scale(b, 4.0), 66.0 / 32);
    EXPECT_DOUBLE_EQ(staging_scale(b, 64.0), 128.0 / 32);  // each thread past 256 values: ctas_per_output3
  }
  // A smaller GPU caps it sooner: an RTX 4090 runs 128 SMs x 12 such blocks, 48 a column.
  const std::vector<StagingBound> ada = staging_bounds(r.lt, r.flags, parse_gpu_capacity("rtx4090").value().resident_threads);
  for (const StagingPair& p : staging_pairs(r.lt, r.flags))
    if (r.lt.size[p.buffer] == 67108864) EXPECT_EQ(ada[p.buffer].reading[0].cap, 48);
}

TEST(ReduceStaging, ColumnSumsOfManyShapesAsPyTorchSizedThemOnTheH200) {
  // generators/gen_reduce_staging.py: x.sum(0) for x of (batch, width), fp32 and bf16, widths 64 to 50257 (odd widths
  // take one output a thread, 64 a narrower block), batches 1024 to 1M, recorded in one trace in this order. From
  // each case that staged, every other batch of its width and type is predicted, up and down, and compared with the
  // buffer PyTorch allocated there (none where it staged none).
  const Recorded r = load("reduce_staging", "reduce_staging");
  std::ifstream f(std::string(ALLOCSCOPE_FIXTURES) + "/reduce_staging/reduce_staging.json");
  const nlohmann::json meta = nlohmann::json::parse(f);
  const uint64_t threads = meta["sms"].get<uint64_t>() * meta["max_threads_per_sm"].get<uint64_t>();
  struct Case {
    uint64_t batch, width, bytes;
    std::string group;
    uint32_t buffer = UINT32_MAX;  // its first staging buffer's row
    uint64_t staged = 0;           // the bytes of its buffers
  };
  std::vector<Case> cases;
  for (const auto& c : meta["cases"]) {
    const uint64_t el = c["dtype"] == "float32" ? 4 : 2;
    cases.push_back({c["batch"].get<uint64_t>(), c["width"].get<uint64_t>(),
                     c["batch"].get<uint64_t>() * c["width"].get<uint64_t>() * el,
                     std::to_string(c["width"].get<uint64_t>()) + " " + c["dtype"].get<std::string>()});
  }
  // Each case's input is allocated first: the pairs after it, before the next case's input, are its. (A buffer can
  // have an input's size: 4096 columns at batch 4096 stage 128 MiB, the next case's input.) An input of 2 GiB or
  // more is summed in two halves (TensorIterator's 32-bit indexing), each staging half: their sum is the prediction.
  std::vector<uint32_t> rows(r.lt.count());
  for (uint32_t i = 0; i < rows.size(); ++i) rows[i] = i;
  std::sort(rows.begin(), rows.end(), [&](uint32_t a, uint32_t b) { return r.lt.alloc_event[a] < r.lt.alloc_event[b]; });
  std::map<uint32_t, uint32_t> buffer_of;  // buffer row -> its pair
  for (const StagingPair& p : staging_pairs(r.lt, r.flags)) buffer_of[p.buffer] = p.semaphores;
  size_t next = 0, at = SIZE_MAX;
  for (uint32_t i : rows) {
    const bool staging = flags_at(r.flags, r.lt.stack[i]) & kReduceStaging;
    if (!staging && next < cases.size() && r.lt.size[i] == cases[next].bytes) at = next++;
    else if (at != SIZE_MAX && buffer_of.count(i)) {
      if (cases[at].buffer == UINT32_MAX) cases[at].buffer = i;
      cases[at].staged += r.lt.size[i];
    }
  }
  ASSERT_EQ(next, cases.size()) << "every case's input found in the trace";
  const std::vector<StagingBound> bounds = staging_bounds(r.lt, r.flags, threads);
  int predicted = 0, staged = 0, exact = 0, at_cap = 0;
  for (const Case& a : cases) {
    if (a.buffer == UINT32_MAX || a.staged != r.lt.size[a.buffer]) continue;  // from one buffer's split
    ++staged;
    const StagingBound& b = bounds[a.buffer];
    EXPECT_GT(b.readings, 0) << a.group << " at " << a.batch << ": its split was not read";
    // Recorded at the cap, the split asked for is known only to lie between the cap and 16 times it, and a buffer's
    // size can read as more than one launch: the predictions take the largest, so are never low, and are exact
    // where one reading below the cap is left.
    const bool capped = b.readings != 1 || b.reading[0].ctas == b.reading[0].cap;
    at_cap += capped;
    for (const Case& c : cases) {
      if (c.group != a.group || c.batch == a.batch) continue;
      const double factor = static_cast<double>(c.batch) / static_cast<double>(a.batch);
      const uint64_t want = c.staged;
      const uint64_t got = scaled(r.lt.size[a.buffer], staging_scale(b, factor));
      ++predicted;
      exact += got == want;
      // Blocks are whole: PyTorch rounds the split up where the model scales it; within one block a column.
      const double block = static_cast<double>(r.lt.size[a.buffer]) / std::max(1.0f, b.readings ? b.reading[0].ctas : 1.0f);
      EXPECT_GE(static_cast<double>(got) + block, static_cast<double>(want)) << a.group << ": " << a.batch << " -> " << c.batch;
      if (!capped)
        EXPECT_LE(std::fabs(static_cast<double>(got) - static_cast<double>(want)), block)
            << a.group << ": " << a.batch << " -> " << c.batch;
    }
  }
  std::printf("  %d cases staged (%d at the cap); %d predictions, %d byte for byte\n", staged, at_cap, predicted, exact);
  EXPECT_GE(staged, 30);
  EXPECT_GE(exact, 89);  // as measured (2026-12-03): the rest are from recordings at the cap, and never low
}

}  // namespace
}  // namespace allocscope::whatif_detail
