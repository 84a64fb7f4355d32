// Devices are analysed on several threads (shared/src/util/parallel.h: lifetimes and the summary's per-device
// analyses): the answer must be the one a single thread gives, byte for byte. The tsan preset runs this too.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <new>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "allocscope/categories.h"
#include "allocscope/frame_filter.h"
#include "allocscope/iterations.h"
#include "allocscope/lifetimes.h"
#include "allocscope/loader.h"
#include "allocscope/plan.h"
#include "allocscope/summary.h"
#include "../cli/synthetic.h"
#include "analysis/lifetimes_parts.h"
#include "util/parallel.h"

namespace allocscope {
namespace {

std::string answer(const Snapshot& s, const FrameFilter& ff) {
  const Lifetimes lt = build_lifetimes(s);
  const Summary sum = summarize(s, lt, ff);
  return to_json(s, sum) + to_text(s, sum);
}

TEST(DeviceThreads, OneThreadAndSeveralGiveTheSameAnswer) {
  for (const char* name : {"external/pt28_4dev_expandable_oom.pickle.gz", "ddp_rank1.pickle",
                           "external/pt21_select_n_4dev.pickle.gz"}) {
    SCOPED_TRACE(name);
    auto s = load_snapshot_file(std::string(ALLOCSCOPE_FIXTURES) + "/" + name);
    ASSERT_TRUE(s.ok()) << s.error().describe();
    const FrameFilter ff(s.value());
    setenv("ALLOCSCOPE_THREADS", "1", 1);
    const std::string one = answer(s.value(), ff);
    unsetenv("ALLOCSCOPE_THREADS");
    const std::string many = answer(s.value(), ff);
    EXPECT_EQ(one, many);
    EXPECT_NE(one.find("device"), std::string::npos);
  }
  // pt28 traces three devices: the threads had work to share.
  auto s = load_snapshot_file(std::string(ALLOCSCOPE_FIXTURES) + "/external/pt28_4dev_expandable_oom.pickle.gz");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(build_lifetimes(s.value()).devices.size(), 3u);
}

// One device's traced rows written on two cores (one copies the allocs' fields, the other replays the frees) must
// give every row, total and warning one core gives, in the same order: on every kept snapshot, every device.
// A trace no real file has all of: addresses allocated twice without a free, frees of blocks allocated before the
// trace (with and without their free_requested just before), and blocks left over in the final segments.
Snapshot shuffled_trace() {
  clitest::SnapshotBuilder b;
  const StackId a = b.stack({{"f", "a.py", 1}}), c = b.stack({{"g", "b.py", 2}});
  b.device();
  std::mt19937_64 rng(12345);
  std::vector<uint64_t> pool;
  for (uint64_t k = 0; k < 3000; ++k) pool.push_back(0x7f0000000000ull + k * 512);
  for (int i = 0; i < 200000; ++i) {
    const uint64_t addr = pool[rng() % pool.size()];
    const uint64_t size = 512 * (1 + rng() % 8);
    switch (rng() % 7) {
      case 0: case 1: case 2: b.event(Action::kAlloc, addr, size, i % 2 ? a : c); break;
      case 3: b.event(Action::kFreeRequested, addr, size, a); break;
      case 4: b.event(Action::kFreeRequested, addr, size, c); b.event(Action::kFreeCompleted, addr, size, a); break;
      default: b.event(Action::kFreeCompleted, addr, size, c); break;
    }
  }
  std::vector<std::tuple<uint64_t, uint64_t, BlockState, StackId>> blocks;
  for (int k = 0; k < 3000; ++k)
    blocks.emplace_back(512, 500, k % 3 == 0 ? BlockState::kActiveAllocated
                                  : k % 3 == 1 ? BlockState::kActivePendingFree : BlockState::kInactive, a);
  b.segment(pool[0], 0, 0, blocks);
  return b.s;
}

TEST(DeviceThreads, TheReplayOnTwoCoresIsTheReplayOnOne) {
  namespace fs = std::filesystem;
  size_t devices = 0, with_freed_only = 0, with_final_state = 0, with_warnings = 0;
  std::vector<std::string> paths = {""};  // "": the shuffled trace
  for (const auto& e : fs::recursive_directory_iterator(ALLOCSCOPE_FIXTURES)) {
    const std::string path = e.path().string();
    if (e.is_regular_file() && (path.ends_with(".pickle") || path.ends_with(".pickle.gz"))) paths.push_back(path);
  }
  for (const std::string& path : paths) {
    auto s = path.empty() ? Result<Snapshot>(shuffled_trace()) : load_snapshot_file(path);
    if (!s.ok()) continue;  // the hostile ones
    SCOPED_TRACE(path.empty() ? "shuffled trace" : path);
    for (const DeviceLifetimes& whole : build_lifetimes(s.value()).devices) {
      const DeviceLifetimes one = detail::build_device_lifetimes_in(s.value(), whole.device, 1);
      const DeviceLifetimes two = detail::build_device_lifetimes_in(s.value(), whole.device, 2);
      for (const DeviceLifetimes* lt : {&whole, &two}) {
        ASSERT_EQ(lt->addr, one.addr);
        ASSERT_EQ(lt->size, one.size);
        ASSERT_EQ(lt->block_size, one.block_size);
        ASSERT_EQ(lt->stream, one.stream);
        ASSERT_EQ(lt->stack, one.stack);
        ASSERT_EQ(lt->alloc_event, one.alloc_event);
        ASSERT_EQ(lt->free_event, one.free_event);
        ASSERT_EQ(lt->free_requested_event, one.free_requested_event);
        ASSERT_EQ(lt->origin, one.origin);
        ASSERT_EQ(lt->total, one.total);
        ASSERT_EQ(lt->warnings, one.warnings);
        ASSERT_EQ(lt->known_peak_step, one.known_peak_step);
      }
      ++devices;
      with_warnings += !one.warnings.empty();
      bool freed = false, final_state = false;
      for (LifetimeOrigin o : one.origin)
        freed |= o == LifetimeOrigin::kFreedOnly, final_state |= o == LifetimeOrigin::kFinalState;
      with_freed_only += freed;
      with_final_state += final_state;
    }
  }
  // The order-dependent parts were exercised: frees without allocs, blocks from before the trace, warnings.
  EXPECT_GT(devices, 100u);
  EXPECT_GT(with_freed_only, 5u);
  EXPECT_GT(with_final_state, 5u);
  EXPECT_GT(with_warnings, 0u);
}

// The summary's file checks count repeated frees from the lifetimes' freed-only rows and the earlier frees at their
// addresses, not from a replay of every address: on every kept snapshot and the shuffled trace, the warnings and
// counts are those of the replay (no lifetimes given).
TEST(SummaryChecks, RepeatedFreesAreCountedAsByTheFullReplay) {
  namespace fs = std::filesystem;
  std::vector<std::string> paths = {""};  // "": the shuffled trace
  for (const auto& e : fs::recursive_directory_iterator(ALLOCSCOPE_FIXTURES)) {
    const std::string path = e.path().string();
    if (e.is_regular_file() && (path.ends_with(".pickle") || path.ends_with(".pickle.gz"))) paths.push_back(path);
  }
  size_t with_freed_only = 0, repeated = 0;
  for (const std::string& path : paths) {
    auto s = path.empty() ? Result<Snapshot>(shuffled_trace()) : load_snapshot_file(path);
    if (!s.ok()) continue;
    SCOPED_TRACE(path.empty() ? "shuffled trace" : path);
    const Lifetimes lts = build_lifetimes(s.value());
    std::vector<std::pair<int64_t, uint64_t>> with, without;
    const std::vector<std::string> w = consistency_warnings(s.value(), lts, &with);
    ASSERT_EQ(w, consistency_warnings(s.value(), Lifetimes{}, &without));
    ASSERT_EQ(with, without);
    for (const auto& [device, n] : with) repeated += n > 0;
    for (const DeviceLifetimes& lt : lts.devices) {
      bool freed_only = false;
      for (LifetimeOrigin o : lt.origin) freed_only |= o == LifetimeOrigin::kFreedOnly;
      with_freed_only += freed_only;
    }
  }
  EXPECT_GT(repeated, 0u);         // the shuffled trace frees addresses twice
  EXPECT_GT(with_freed_only, 5u);  // wrapped ring buffers: freed-only rows that are not repeated frees
}

// `summarize` building its own lifetimes (the segment timelines beside them) answers as given the lifetimes, on every
// kept snapshot: several devices, merged files with an outside part, segments without a trace.
TEST(DeviceThreads, SummaryBuildingItsLifetimesIsTheSame) {
  namespace fs = std::filesystem;
  size_t files = 0, several = 0;
  for (const auto& e : fs::recursive_directory_iterator(ALLOCSCOPE_FIXTURES)) {
    const std::string path = e.path().string();
    if (!e.is_regular_file() || !(path.ends_with(".pickle") || path.ends_with(".pickle.gz"))) continue;
    auto s = load_snapshot_file(path);
    if (!s.ok()) continue;
    SCOPED_TRACE(path);
    const FrameFilter ff(s.value());
    const Summary own = summarize(s.value(), ff, 7);
    ASSERT_EQ(to_json(s.value(), own) + to_text(s.value(), own),
              to_json(s.value(), summarize(s.value(), build_lifetimes(s.value()), ff, 7)) +
                  to_text(s.value(), summarize(s.value(), build_lifetimes(s.value()), ff, 7)));
    ++files;
    several += own.devices.size() > 1;
  }
  EXPECT_GT(files, 100u);
  EXPECT_GT(several, 3u);
}

// detail::both: with no core to spare, `a` runs before `b` on the calling thread; with one, both run, and the caller
// sees both results once it returns.
TEST(DeviceThreads, BothRunsEachPieceOnceInOrderWhenNoCoreIsSpare) {
  std::vector<int> order;
  detail::both(false, [&] { order.push_back(1); }, [&] { order.push_back(2); });
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  int a = 0, b = 0;
  detail::both(true, [&] { a = 7; }, [&] { b = 9; });
  EXPECT_EQ(a, 7);
  EXPECT_EQ(b, 9);
}

// Out of memory on a worker (one device's analyses of a large file) reaches the caller as it would on one thread,
// where the CLI turns it into a one-line answer: an exception leaving a std::thread calls std::terminate.
TEST(DeviceThreads, AnExceptionOnAWorkerReachesTheCaller) {
  if (detail::threads_for(2) < 2) GTEST_SKIP() << "one core (or ALLOCSCOPE_THREADS=1): no worker thread to test";
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> on_worker{0};
  auto throw_on_worker = [&](size_t) {
    if (std::this_thread::get_id() != caller) {
      ++on_worker;
      throw std::bad_alloc();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // leaves items for the worker
  };
  EXPECT_THROW(detail::parallel_for(64, throw_on_worker), std::bad_alloc);
  EXPECT_EQ(on_worker.load(), 1);  // the others stop at their next item
  EXPECT_THROW(detail::parallel_for(64, [](size_t i) {
                 if (i == 0) throw std::bad_alloc();
               }),
               std::bad_alloc);
  EXPECT_THROW(detail::both(true, [] { throw std::bad_alloc(); }, [] {}), std::bad_alloc);
  std::atomic<bool> a_done{false};
  EXPECT_THROW(detail::both(
                   true,
                   [&] {
                     std::this_thread::sleep_for(std::chrono::milliseconds(20));
                     a_done = true;
                   },
                   [] { throw std::length_error("b"); }),
               std::length_error);
  EXPECT_TRUE(a_done.load());  // joined before the exception left
}

// `plan` predicts its options on several threads (plan.cpp, predict_each): the plan must be the one a single thread
// makes, in its order, with and without a GPU (without one it tries pairs; on a GPU nothing fits, triples too).
TEST(DeviceThreads, PlanOnOneThreadAndSeveralIsTheSame) {
  auto s = load_snapshot_file(std::string(ALLOCSCOPE_FIXTURES) + "/plan_runs/gpt_sdpa.pickle.gz");
  ASSERT_TRUE(s.ok()) << s.error().describe();
  const DeviceLifetimes lt = build_device_lifetimes(s.value(), 0);
  auto c = categorize(s.value(), lt, detect_iterations(s.value(), lt), FrameFilter(s.value()));
  ASSERT_TRUE(c.ok());
  GpuCapacity small;
  small.total_bytes = 1ull << 30;
  small.label = "1 GiB";
  for (const std::optional<GpuCapacity>& gpu : {std::optional<GpuCapacity>{}, std::optional<GpuCapacity>{small}}) {
    PlanOptions o;
    o.gpu = gpu;
    setenv("ALLOCSCOPE_THREADS", "1", 1);
    const Plan one = plan(s.value(), lt, c.value(), o);
    unsetenv("ALLOCSCOPE_THREADS");
    const Plan many = plan(s.value(), lt, c.value(), o);
    EXPECT_EQ(to_json(one), to_json(many));
    EXPECT_EQ(to_text(one), to_text(many));
    EXPECT_GE(one.tried, gpu ? 30u : 20u);  // the combinations were tried too
    EXPECT_FALSE(one.options.empty());
  }
}

}  // namespace
}  // namespace allocscope
