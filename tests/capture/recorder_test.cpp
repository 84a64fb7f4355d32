// Recorder core on the CPU: ring-buffer wrap, stack interning, symbolization of this binary's functions, trace and
// segments agreeing, many threads at once, and output that our loader and Python's pickle both read.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "allocscope/loader.h"
#include "allocscope/writer.h"
#include "recorder.h"
#include "snapshot_builder.h"
#include "source_lines.h"

using namespace allocscope;
using namespace allocscope::capture;

namespace {

Options opts(uint64_t max_entries, StackMode stacks = StackMode::kNative) {
  Options o;
  o.max_entries = max_entries;
  o.stacks = stacks;
  o.dump_at_exit = false;
  o.dump_on_oom = false;
  return o;
}

Site site(int64_t stream = 0, int16_t device = 0) {
  Site s;
  s.api = Api::kMemAlloc;
  s.stream = stream;
  s.device = device;
  return s;
}

std::string tmp_path(const std::string& name) {
  const char* d = std::getenv("TMPDIR");
  return std::string(d && *d ? d : "/tmp") + "/allocscope_capture_" + std::to_string(getpid()) + "_" + name;
}

// Distinct, non-inlined call sites whose names the symbolizer must find.
__attribute__((noinline)) void capture_test_alloc_site_one(Recorder& r, uint64_t addr) {
  r.on_alloc(site(), addr, 4096, SegmentKind::kPlain, 0);
  asm volatile("");
}
__attribute__((noinline)) void capture_test_alloc_site_two(Recorder& r, uint64_t addr) {
  r.on_alloc(site(7), addr, 8192, SegmentKind::kAsync, 0);
  asm volatile("");
}
__attribute__((noinline)) void capture_test_free_site(Recorder& r, uint64_t addr, bool async) {
  r.on_free(site(7), addr, 0, async, 0);
  asm volatile("");
}

std::vector<std::string> frame_names(const Snapshot& s, StackId id) {
  std::vector<std::string> out;
  for (FrameId f : s.stack(id)) out.emplace_back(s.str(s.frames[f].name));
  return out;
}

bool any_contains(const std::vector<std::string>& v, const std::string& needle) {
  return std::any_of(v.begin(), v.end(), [&](const std::string& s) { return s.find(needle) != std::string::npos; });
}

// Replays the trace forward and checks that what stays allocated is exactly the `segments` list.
void expect_segments_agree(const Snapshot& s) {
  std::set<std::pair<int64_t, uint64_t>> live;
  for (const DeviceTrace& d : s.devices) {
    for (uint32_t i = d.begin; i < d.end; ++i) {
      const Action a = s.events.action[i];
      if (a == Action::kSegmentAlloc || a == Action::kSegmentMap) live.insert({d.device, s.events.addr[i]});
      if (a == Action::kSegmentFree || a == Action::kSegmentUnmap) live.erase({d.device, s.events.addr[i]});
    }
  }
  std::set<std::pair<int64_t, uint64_t>> segs;
  for (const Segment& g : s.segments) segs.insert({g.device, g.address});
  EXPECT_EQ(live, segs);
}

}  // namespace

TEST(CaptureRecorder, MapsCallsToPyTorchActions) {
  Recorder r(opts(100));
  capture_test_alloc_site_one(r, 0x1000);
  capture_test_alloc_site_two(r, 0x9000);
  capture_test_free_site(r, 0x9000, /*async=*/true);
  r.on_map(site(), 0x20000, 1 << 21, 0);
  r.on_unmap(site(), 0x20000, 1 << 21, 0);
  r.on_oom(site(3), 1ull << 40, 12345, 0);
  Frozen f = r.freeze();
  const Snapshot s = build_snapshot(f);
  ASSERT_EQ(s.devices.size(), 1u);
  std::vector<Action> got(s.events.action.begin(), s.events.action.end());
  const std::vector<Action> want = {Action::kSegmentAlloc, Action::kAlloc,        Action::kSegmentAlloc,
                                    Action::kAlloc,        Action::kFreeRequested, Action::kFreeCompleted,
                                    Action::kSegmentFree,  Action::kSegmentMap,   Action::kAlloc,
                                    Action::kFreeCompleted, Action::kSegmentUnmap, Action::kOom};
  EXPECT_EQ(got, want);
  // The free found the allocation's size and completes on its stream.
  EXPECT_EQ(s.events.size[5], 8192u);
  EXPECT_EQ(s.events.stream[5], 7);
  // oom: size is what was asked, addr holds device_free.
  EXPECT_EQ(s.events.size[11], 1ull << 40);
  EXPECT_EQ(s.events.addr[11], 12345u);
  EXPECT_EQ(s.events.stream[11], 3);
  ASSERT_EQ(s.segments.size(), 1u);
  EXPECT_EQ(s.segments[0].address, 0x1000u);
  EXPECT_EQ(s.segments[0].total_size, 4096u);
  ASSERT_EQ(s.blocks_of(s.segments[0]).size(), 1u);
  EXPECT_EQ(s.blocks_of(s.segments[0])[0].state, BlockState::kActiveAllocated);
  expect_segments_agree(s);
  EXPECT_NE(s.str(s.events.user_metadata[0]).find("api=cuMemAlloc"), std::string::npos);
}

TEST(CaptureRecorder, RingBufferKeepsTheNewestEntries) {
  Recorder r(opts(10, StackMode::kNone));
  for (uint64_t i = 1; i <= 20; ++i) r.on_alloc(site(), i * 0x1000, i, SegmentKind::kPlain, 0);  // 40 events
  Frozen f = r.freeze();
  EXPECT_EQ(f.recorded, 40u);
  EXPECT_EQ(f.dropped, 30u);
  const Snapshot s = build_snapshot(f);
  ASSERT_EQ(s.events.size_rows(), 10u);
  // Oldest first: allocations 16..20, each segment_alloc then alloc.
  for (size_t k = 0; k < 10; ++k) {
    EXPECT_EQ(s.events.addr[k], (16 + k / 2) * 0x1000) << k;
    EXPECT_EQ(s.events.action[k], k % 2 ? Action::kAlloc : Action::kSegmentAlloc);
  }
  // Everything alive is still in `segments`, though its allocation fell out of the window.
  EXPECT_EQ(s.segments.size(), 20u);
}

TEST(CaptureRecorder, InternsStacksAndNamesThisBinarysFunctions) {
  Recorder r(opts(1000));
  for (int i = 0; i < 5; ++i) capture_test_alloc_site_one(r, 0x1000 + i * 0x100);
  capture_test_alloc_site_two(r, 0x90000);
  Frozen f = r.freeze();
  // Five calls from one site share one stack; the other site has its own.
  std::set<uint32_t> one, two;
  for (const RawEvent& e : f.events) (e.addr < 0x90000 ? one : two).insert(e.stack);
  EXPECT_EQ(one.size(), 1u);
  EXPECT_EQ(two.size(), 1u);
  EXPECT_NE(*one.begin(), *two.begin());
  EXPECT_NE(*one.begin(), 0u);
  const Snapshot s = build_snapshot(f);
  const auto names_one = frame_names(s, s.events.stack[0]);
  const auto names_two = frame_names(s, s.events.stack[s.events.size_rows() - 1]);
  ASSERT_FALSE(names_one.empty());
  // Innermost first, the recorder's own frames dropped: the call site is the first frame.
  EXPECT_NE(names_one[0].find("capture_test_alloc_site_one"), std::string::npos) << names_one[0];
  EXPECT_NE(names_two[0].find("capture_test_alloc_site_two"), std::string::npos) << names_two[0];
  EXPECT_TRUE(any_contains(names_one, "InternsStacksAndNamesThisBinarysFunctions"));
  // Frames carry the module path (no file:line without debug info readers).
  EXPECT_NE(std::string(s.str(s.frames[s.stack(s.events.stack[0])[0]].filename)).find("capture"), std::string::npos);
}

// This file is compiled with -g: where libdw is installed, frames carry file:line from DWARF.
TEST(CaptureRecorder, FileAndLineFromDebugInfo) {
  if (!SourceLines().available()) GTEST_SKIP() << "libdw.so.1 not installed: frames carry module paths only";
  Recorder r(opts(100));
  capture_test_alloc_site_one(r, 0x1000);
  const Snapshot s = build_snapshot(r.freeze());
  const Frame& top = s.frames[s.stack(s.events.stack[0])[0]];
  EXPECT_NE(std::string(s.str(top.filename)).find("recorder_test.cpp"), std::string::npos) << s.str(top.filename);
  EXPECT_GT(top.line, 30);
  EXPECT_NE(std::string(s.str(top.name)).find("capture_test_alloc_site_one"), std::string::npos);
}

TEST(CaptureRecorder, NoStacksModeRecordsEmptyStacks) {
  Recorder r(opts(100, StackMode::kNone));
  capture_test_alloc_site_one(r, 0x1000);
  const Snapshot s = build_snapshot(r.freeze());
  EXPECT_EQ(s.events.stack[0], 0u);
  EXPECT_TRUE(s.stack(0).empty());
}

TEST(CaptureRecorder, RangesBecomeAnnotationsAndMetadataPaths) {
  Recorder r(opts(100));
  r.push_range("train", 0);
  r.push_range("forward", 0);
  capture_test_alloc_site_one(r, 0x1000);
  r.pop_range(0);
  r.pop_range(0);
  capture_test_alloc_site_one(r, 0x2000);
  const Snapshot s = build_snapshot(r.freeze());
  ASSERT_EQ(s.annotations.size(), 4u);
  EXPECT_TRUE(s.annotations[0].start);
  EXPECT_EQ(s.str(s.annotations[1].name), "forward");
  EXPECT_FALSE(s.annotations[2].start);
  EXPECT_EQ(s.str(s.annotations[2].name), "forward");
  EXPECT_EQ(s.str(s.annotations[3].name), "train");
  EXPECT_NE(s.str(s.events.user_metadata[0]).find("nvtx=train/forward"), std::string::npos)
      << s.str(s.events.user_metadata[0]);
  EXPECT_EQ(s.str(s.events.user_metadata[2]).find("nvtx="), std::string::npos);
}

TEST(CaptureRecorder, EventsAreGroupedPerDevice) {
  Recorder r(opts(100, StackMode::kNone));
  r.on_alloc(site(0, 1), 0x1000, 10, SegmentKind::kPlain, 0);
  r.on_alloc(site(0, 0), 0x2000, 20, SegmentKind::kPlain, 0);
  r.on_free(site(0, 1), 0x1000, 0, false, 0);
  const Snapshot s = build_snapshot(r.freeze());
  ASSERT_EQ(s.devices.size(), 2u);
  EXPECT_EQ(s.devices[0].count(), 2u);
  EXPECT_EQ(s.devices[1].count(), 4u);
  expect_segments_agree(s);
}

// The context's frees go on the trace of the device each allocation was made on: a job that resets device 1
// while device 0 is current must not see device 1's memory freed on device 0.
TEST(CaptureRecorder, ContextDestroyFreesWhatItHeld) {
  Recorder r(opts(100, StackMode::kNone));
  Site s1 = site(0, 1);
  s1.context = 5;
  r.on_alloc(s1, 0x1000, 10, SegmentKind::kPlain, 0);
  r.on_alloc(site(), 0x2000, 20, SegmentKind::kPlain, 0);
  r.on_context_destroy(5);
  const Snapshot s = build_snapshot(r.freeze());
  ASSERT_EQ(s.segments.size(), 1u);
  EXPECT_EQ(s.segments[0].address, 0x2000u);
  ASSERT_EQ(s.devices.size(), 2u);
  EXPECT_EQ(s.devices[0].count(), 2u);  // device 0's segment_alloc and alloc
  EXPECT_EQ(s.devices[1].count(), 4u);  // device 1's two, and the destroy's free_completed and segment_free
  for (uint32_t row = s.devices[1].begin; row < s.devices[1].end; ++row) EXPECT_EQ(s.events.addr[row], 0x1000u);
  expect_segments_agree(s);
}

// Labelled `threads` (run under TSan by the tsan preset): many threads allocate and free at once.
// cuMemPoolTrimTo changes no segment (a pool's own reservations are not segments): it is an instant annotation that
// says what the pool reserved before and after, and a count on the pool's entry; the trace is untouched.
TEST(CaptureRecorder, PoolTrimIsAnInstantAnnotationAndACount) {
  Recorder r(opts(100, StackMode::kNone));
  r.note_created({HandleKind::kPool, 0xabc0, 0, 1, 0, now_us()});
  Site s = site(5);
  s.api = Api::kMemAllocFromPoolAsync;
  s.pool = 0xabc0;
  r.on_alloc(s, 0x5000, 3 << 20, SegmentKind::kAsync, 0);
  r.on_free(s, 0x5000, 0, true, 0);
  r.on_pool_trim(site(), 0xabc0, 0, 4 << 20, 0);
  r.on_pool_trim(site(), 0xdef0, 1024, kUnknownBytes, kUnknownBytes);  // e.g. a device's default pool
  Frozen f = r.freeze();
  EXPECT_EQ(f.recorded, 5u);  // segment_alloc, alloc, free_requested, free_completed, segment_free: no trim entry
  EXPECT_EQ(f.pool_trims, 2u);
  const Snapshot snap = build_snapshot(f);
  ASSERT_EQ(snap.annotations.size(), 4u);
  EXPECT_TRUE(snap.annotations[0].start);
  EXPECT_FALSE(snap.annotations[1].start);
  EXPECT_EQ(snap.annotations[0].time_us, snap.annotations[1].time_us);
  EXPECT_EQ(snap.str(snap.annotations[0].name), "cuMemPoolTrimTo pool=0xabc0 keep=0 reserved=4194304->0");
  EXPECT_EQ(snap.str(snap.annotations[1].name), snap.str(snap.annotations[0].name));
  EXPECT_EQ(snap.str(snap.annotations[2].name), "cuMemPoolTrimTo pool=0xdef0 keep=1024 reserved=?->?");
  EXPECT_NE(snap.str(snap.events.user_metadata[0]).find("api=cuMemAllocFromPoolAsync pool=0xabc0"), std::string::npos);
  std::string pools, trims;
  for (const Setting& st : snap.allocator_settings)
    for (const Setting& c : st.children) {
      if (c.key == "memory_pools") pools = c.repr();
      if (c.key == "pool_trims") trims = c.repr();
    }
  EXPECT_NE(pools.find("0xabc0"), std::string::npos) << pools;
  EXPECT_NE(pools.find("trims=1 reserved_after_last_trim=0"), std::string::npos) << pools;
  EXPECT_EQ(trims, "2");
  expect_segments_agree(snap);
}

TEST(CaptureThreads, ManyAllocatingThreads) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 3000;
  Recorder r(opts(5000));
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&r, t] {
      if (t == 0) r.push_range("worker0", 0);
      for (int i = 0; i < kPerThread; ++i) {
        const uint64_t addr = (uint64_t(t + 1) << 32) + uint64_t(i) * 256;
        if (i % 2) capture_test_alloc_site_one(r, addr);
        else capture_test_alloc_site_two(r, addr);
        if (i % 3 != 0) capture_test_free_site(r, addr, i % 2 == 0);
      }
      if (t == 0) r.pop_range(0);
    });
  }
  // A dump racing with the writers must still be consistent.
  Frozen mid = r.freeze();
  Snapshot mid_snap = build_snapshot(mid);
  for (auto& t : ts) t.join();
  Frozen f = r.freeze();
  const uint64_t allocs = uint64_t(kThreads) * kPerThread;
  uint64_t frees_sync = 0, frees_async = 0;
  for (int i = 0; i < kPerThread; ++i)
    if (i % 3 != 0) (i % 2 == 0 ? frees_async : frees_sync) += kThreads;
  EXPECT_EQ(f.recorded, allocs * 2 + frees_sync * 2 + frees_async * 3);
  EXPECT_EQ(f.events.size(), 5000u);
  EXPECT_EQ(f.live.size(), allocs - frees_sync - frees_async);
  EXPECT_EQ(f.stacks.size(), 4u);  // empty + three call sites: interning worked across threads
  const Snapshot s = build_snapshot(f);
  EXPECT_EQ(s.segments.size(), f.live.size());
  EXPECT_GE(mid_snap.segments.size(), 0u);
}

TEST(CaptureOutput, LoadsWithOurLoaderAndPythonPickle) {
  Recorder r(opts(1000));
  r.push_range("step", 0);
  for (int i = 0; i < 50; ++i) capture_test_alloc_site_one(r, 0x100000 + i * 0x1000);
  for (int i = 0; i < 25; ++i) capture_test_free_site(r, 0x100000 + i * 0x1000, i % 2);
  r.on_oom(site(), 1ull << 40, 777, 0);
  r.pop_range(0);
  const Snapshot s = build_snapshot(r.freeze());
  for (const std::string& name : {std::string("out.pickle"), std::string("out.pickle.gz")}) {
    const std::string path = tmp_path(name);
    const Status st = write_snapshot_file(s, path);
    ASSERT_TRUE(st.ok()) << st.error().describe();
    auto back = load_snapshot_file(path);
    ASSERT_TRUE(back.ok()) << back.error().describe();
    EXPECT_EQ(back->events.size_rows(), s.events.size_rows());
    EXPECT_EQ(back->segments.size(), 25u);
    EXPECT_EQ(back->annotations.size(), 2u);
    expect_segments_agree(*back);
    int oom = 0;
    for (size_t i = 0; i < back->events.size_rows(); ++i)
      if (back->events.action[i] == Action::kOom) {
        ++oom;
        EXPECT_EQ(back->events.addr[i], 777u);
      }
    EXPECT_EQ(oom, 1);
    // Stacks survive the round trip with their function names.
    EXPECT_TRUE(any_contains(frame_names(*back, back->events.stack[0]), "capture_test_alloc_site_one"));

    if (std::system("python3 -c 'import pickle' >/dev/null 2>&1") != 0) {
      std::remove(path.c_str());
      GTEST_SKIP() << "python3 not available";
    }
    const std::string py =
        "import gzip,pickle,sys\n"
        "p=sys.argv[1]\n"
        "d=pickle.load(gzip.open(p) if p.endswith('.gz') else open(p,'rb'))\n"
        "t=d['device_traces'][0]\n"
        "assert len(d['segments'])==25, len(d['segments'])\n"
        "assert any(e['action']=='oom' and e['device_free']==777 for e in t)\n"
        "assert any('capture_test_alloc_site_one' in f['name'] for f in t[0]['frames'])\n"
        "assert {a['stage'] for a in d['external_annotations']}=={'START','END'}\n"
        "assert 'allocscope_capture' in d['allocator_settings']\n";
    const std::string script = tmp_path("check.py");
    FILE* fp = std::fopen(script.c_str(), "w");
    ASSERT_TRUE(fp);
    std::fputs(py.c_str(), fp);
    std::fclose(fp);
    EXPECT_EQ(std::system(("python3 " + script + " " + path).c_str()), 0);
    std::remove(script.c_str());
    std::remove(path.c_str());
  }
}
