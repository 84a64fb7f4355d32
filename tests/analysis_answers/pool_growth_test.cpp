// A capture without PyTorch's tensors judges what it can see: a library's pool that grows at every iteration start
// after warm-up is growth, with its sites (never "no leak: nothing grows"); a pool that fills at warm-up and stays
// level is not, on crafted captures and on every capture a GPU job recorded (tests/fixtures/capture_*).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "allocscope/categories.h"
#include "allocscope/frame_filter.h"
#include "allocscope/iterations.h"
#include "allocscope/leaks.h"
#include "allocscope/lifetimes.h"
#include "allocscope/summary.h"
#include "answers_fixtures.h"
#include "../cli/synthetic.h"

namespace allocscope::test {
namespace {

LeakReport leaks_of(const Snapshot& s, int64_t device = 0) {
  const FrameFilter ff(s);
  const Lifetimes lts = build_lifetimes(s);
  for (const DeviceLifetimes& lt : lts.devices) {
    if (lt.device != device) continue;
    const Iterations it = detect_iterations(s, lt);
    auto c = categorize(s, lt, it, ff);
    EXPECT_TRUE(c.ok());
    return find_leaks(s, lt, it, c.value(), ff);
  }
  ADD_FAILURE() << "no device " << device;
  return {};
}

// A capture (the capture's settings key) of `steps` iterations, found from their repeating allocations (a capture has
// no optimizer annotations): PyTorch's caching allocator
// reserves one 20 MiB segment at each of the first three steps (warm-up), then `grow(step)` more, each at the
// planted leak's line, kept; a workspace the job frees every step beside it.
Snapshot capture(int steps, bool (*grow)(int)) {
  clitest::SnapshotBuilder b;
  const StackId pool = b.stack({{"cudaMalloc", "/usr/local/cuda/lib64/libcudart.so.13", 0},
                                {"c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(...)",
                                 "/venv/site-packages/torch/lib/libc10_cuda.so", 0},
                                {"train_step", "/home/u/leaky.py", 42},
                                {"<module>", "/home/u/leaky.py", 60}});
  const StackId scratch = b.stack({{"cudaMalloc", "/usr/local/cuda/lib64/libcudart.so.13", 0},
                                   {"scratch", "/home/u/leaky.py", 50}});
  const StackId batch = b.stack({{"cudaMalloc", "/usr/local/cuda/lib64/libcudart.so.13", 0},
                                 {"load_batch", "/home/u/leaky.py", 30}});
  Setting cap;
  cap.key = "allocscope_capture";
  cap.kind = Setting::Kind::kDict;
  b.s.allocator_settings.push_back(cap);
  b.device();
  uint64_t addr = 0x7f0000000000;
  for (int step = 0; step < steps; ++step) {
    if (step < 3 || grow(step)) b.event(Action::kSegmentAlloc, addr, 20 << 20, pool), b.event(Action::kAlloc, addr, 20 << 20, pool), addr += 20 << 20;
    b.event(Action::kAlloc, 0x200000, 4096, batch);
    b.event(Action::kAlloc, 0x100000, 4096, scratch);
    b.event(Action::kFreeCompleted, 0x100000, 4096, scratch);
    b.event(Action::kFreeCompleted, 0x200000, 4096, batch);
  }
  return std::move(b.s);
}

bool every_step(int) { return true; }
bool never(int) { return false; }
bool every_third(int step) { return step % 3 == 0; }

TEST(PoolGrowth, APoolGrowingAfterWarmUpIsGrowthWithItsSites) {
  const Snapshot s = capture(12, every_step);
  const LeakReport r = leaks_of(s);
  ASSERT_TRUE(r.judged());
  EXPECT_FALSE(r.leak_suspected());  // no allocation of the program's own grows
  ASSERT_TRUE(r.pool_growth_suspected());
  const PoolGrowth& g = r.pools_growing.front();
  EXPECT_EQ(g.owner, Owner::kPyTorch);
  EXPECT_EQ(g.bytes_per_iteration, 20u << 20);
  ASSERT_FALSE(g.sites.empty());
  EXPECT_EQ(FrameFilter::format(s, g.sites.front().site), "leaky.py:42:train_step");
  const std::string text = to_text(s, r);
  EXPECT_NE(text.find("GROWTH: PyTorch caching allocator reserves more at every iteration start after warm-up"),
            std::string::npos) << text;
  EXPECT_NE(text.find("leaky.py:42:train_step"), std::string::npos) << text;
  EXPECT_EQ(text.find("nothing grows"), std::string::npos) << text;
  const std::string json = to_json(s, r);
  EXPECT_NE(json.find("\"pool_growth_suspected\":true"), std::string::npos) << json;
  // `summary` says it among its warnings.
  const Summary sum = summarize(s, FrameFilter(s));
  bool warned = false;
  for (const std::string& w : sum.warnings) warned |= w.find("pool growth: PyTorch caching allocator") != std::string::npos;
  EXPECT_TRUE(warned);
  // A pool that grows by a segment every third step grows too.
  EXPECT_TRUE(leaks_of(capture(15, every_third)).pool_growth_suspected());
}

TEST(PoolGrowth, APoolThatFillsAtWarmUpAndStaysLevelIsNot) {
  const Snapshot s = capture(12, never);
  const LeakReport r = leaks_of(s);
  ASSERT_TRUE(r.judged());
  EXPECT_FALSE(r.pool_growth_suspected());
  EXPECT_TRUE(r.pools_growing.empty());
  EXPECT_GT(r.library_reservations_left_out, 0u);
  EXPECT_TRUE(r.pools_judged);
  EXPECT_NE(to_text(s, r).find("no leak: nothing grows"), std::string::npos) << to_text(s, r);
  // With fewer iterations than a pool's trend needs, a pool growing at each one is not called "nothing grows".
  const Snapshot few = capture(7, every_step);
  const LeakReport rf = leaks_of(few);
  ASSERT_TRUE(rf.judged());
  EXPECT_FALSE(rf.pools_judged);
  const std::string text = to_text(few, rf);
  EXPECT_EQ(text.find("nothing grows"), std::string::npos) << text;
  EXPECT_NE(text.find("the library pools' growth is not judged: 7 iterations"), std::string::npos) << text;
}

// Every capture a GPU job wrote here (healthy jobs: PyTorch, CuPy, JAX, NCCL, torchrun's ranks): no pool growth.
// (NCCL's 64 buffers made in DDP's constructor repeat one stack, and read as 64 "iterations" of a growing pool: NCCL
// is not a pool of tensors, and is not judged as one.)
TEST(PoolGrowth, NoRecordedHealthyCaptureIsToldItsPoolGrows) {
  for (const char* name : {"capture_owners/torch", "capture_owners/cupy", "capture_owners/jax", "capture_python/torch",
                           "capture_python/cupy", "capture_python/jax", "capture_python/nccl", "capture_lent/torch",
                           "capture_lent/torch_nocache", "capture_lent/nccl", "capture_nccl2/lent/rank0",
                           "capture_nccl2/lent/rank1", "capture_owners/torchrun/allocscope-rank2-753"}) {
    const Loaded* l = load(name);
    ASSERT_TRUE(l) << name;
    for (const DeviceLifetimes& lt : l->lifetimes.devices) {
      if (lt.event_count == 0) continue;
      const LeakReport r = leaks_of(l->s, lt.device);
      EXPECT_FALSE(r.pool_growth_suspected()) << name << ": " << to_text(l->s, r);
      EXPECT_FALSE(r.leak_suspected()) << name << ": " << to_text(l->s, r);
    }
  }
}

}  // namespace
}  // namespace allocscope::test
