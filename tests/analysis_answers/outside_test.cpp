// Merged snapshots (outside.h): PyTorch's own snapshot plus the capture's memory outside PyTorch's allocator, from
// the three jobs recorded on an H100 with both recorders on (tests/fixtures/capture_torch_pair). The oracle is
// PyTorch's recorder: at any quiet moment, what the capture saw on the device equals PyTorch's own reserved bytes plus
// what the merged file says is outside, and PyTorch's part reads exactly as PyTorch's file does.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>

#include "allocscope/loader.h"
#include "allocscope/oom.h"
#include "allocscope/outside.h"
#include "allocscope/segment_timeline.h"
#include "allocscope/summary.h"
#include "allocscope/writer.h"
#include "answers_fixtures.h"
#include "cli_run.h"
#include "../cli/synthetic.h"

namespace allocscope::test {
namespace {


const char* const kJobs[] = {"torch", "nccl", "oom"};

std::string pair_path(const std::string& job, const char* suffix) {
  return std::string(ALLOCSCOPE_FIXTURES) + "/capture_torch_pair/" + job + suffix;
}

std::vector<uint8_t> raw_pickle(const std::string& path) {
  auto b = read_file(path);
  EXPECT_TRUE(b.ok());
  if (!b.ok()) return {};
  auto raw = gunzip(b.value());
  EXPECT_TRUE(raw.ok());
  return raw.ok() ? std::move(raw).value() : std::vector<uint8_t>{};
}

std::vector<uint8_t> merged_bytes(const std::string& job) {
  const Loaded* cap = load("capture_torch_pair/" + job);
  EXPECT_TRUE(cap);
  if (!cap) return {};
  auto m = merge_capture(raw_pickle(pair_path(job, ".torch.pickle.gz")), cap->s);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().describe());
  return m.ok() ? std::move(m.value().bytes) : std::vector<uint8_t>{};
}

// The step (events applied) of a device's trace at wall-clock time t.
uint32_t step_at(const Snapshot& s, const DeviceTrace& d, int64_t t) {
  uint32_t step = 0;
  for (uint32_t i = d.begin; i < d.end; ++i)
    if (s.events.time_us[i] <= t) step = i - d.begin + 1;
  return step;
}

bool quiet(const Snapshot& s, const DeviceTrace& d, int64_t t, int64_t margin) {
  for (uint32_t i = d.begin; i < d.end; ++i)
    if (std::llabs(s.events.time_us[i] - t) < margin) return false;
  return true;
}

TEST(Outside, CaptureTotalIsPyTorchsReservedPlusOutside) {
  for (const char* job : kJobs) {
    SCOPED_TRACE(job);
    const Loaded* cap = load(std::string("capture_torch_pair/") + job);
    const Loaded* pt = load(std::string("capture_torch_pair/") + job + ".torch");
    ASSERT_TRUE(cap && pt);
    const std::vector<uint8_t> bytes = merged_bytes(job);
    auto m = load_snapshot(bytes);
    ASSERT_TRUE(m.ok()) << m.error().describe();
    const Snapshot& s = m.value();
    ASSERT_TRUE(s.outside);
    EXPECT_TRUE(is_capture(*s.outside));
    EXPECT_FALSE(is_capture(s));

    const DeviceLifetimes clt = build_device_lifetimes(cap->s, 0);
    const SegmentTimeline pst = build_segment_timeline(pt->s, 0);
    const DeviceTrace& cd = *cap->s.device(0);
    const DeviceTrace& pd = *pt->s.device(0);
    // Moments between events of both traces (1 ms from any), so the two recorders' stamps of one cudaMalloc (tens
    // of microseconds apart) cannot fall on either side.
    const OutsideIndex index(s, 0);
    int checked = 0, with_outside = 0;
    const int64_t t0 = cap->s.events.time_us[cd.begin], t1 = cap->s.events.time_us[cd.end - 1];
    for (int k = 1; k < 1000; ++k) {
      const int64_t t = t0 + (t1 - t0) * k / 1000;
      if (!quiet(cap->s, cd, t, 1000) || !quiet(pt->s, pd, t, 1000)) continue;
      const uint64_t device = clt.total[step_at(cap->s, cd, t)];
      const uint64_t reserved = pst.total[step_at(pt->s, pd, t)];
      const OutsideAt o = index.at(t);
      ASSERT_EQ(device, reserved + o.bytes) << "at " << t;
      uint64_t by_owner = 0;
      for (const auto& [owner, b] : o.by_owner) {
        EXPECT_NE(owner, Owner::kPyTorch);
        by_owner += b;
      }
      EXPECT_EQ(by_owner, o.bytes);
      ++checked;
      with_outside += o.bytes > 0;
    }
    std::printf("%s: %d moments checked, %d with outside memory\n", job, checked, with_outside);
    EXPECT_GT(checked, 100);
    // The OOM job allocates through PyTorch only; the others' matmuls make cuBLAS workspaces, and NCCL its buffers.
    EXPECT_EQ(with_outside > 0, std::string(job) != "oom");
    EXPECT_EQ(s.outside->events.size_rows() > 0, std::string(job) != "oom");
    // And at the end: the live segments of the three files.
    uint64_t cap_live = 0, pt_live = 0, out_live = 0;
    for (const Segment& seg : cap->s.segments) cap_live += seg.total_size;
    for (const Segment& seg : pt->s.segments) pt_live += seg.total_size;
    for (const Segment& seg : s.outside->segments) out_live += seg.total_size;
    EXPECT_EQ(cap_live, pt_live + out_live);
  }
}

TEST(Outside, PyTorchsPartIsPyTorchsFile) {
  for (const char* job : kJobs) {
    SCOPED_TRACE(job);
    const std::vector<uint8_t> torch = raw_pickle(pair_path(job, ".torch.pickle.gz"));
    const std::vector<uint8_t> bytes = merged_bytes(job);
    ASSERT_GT(bytes.size(), torch.size());
    // Byte for byte up to PyTorch's STOP, so PyTorch's tools read what they wrote.
    EXPECT_TRUE(std::equal(torch.begin(), torch.end() - 1, bytes.begin()));
    auto m = load_snapshot(bytes);
    const Loaded* pt = load(std::string("capture_torch_pair/") + job + ".torch");
    ASSERT_TRUE(m.ok() && pt);
    const Snapshot& s = m.value();
    EXPECT_EQ(s.segments.size(), pt->s.segments.size());
    EXPECT_EQ(s.blocks.size(), pt->s.blocks.size());
    ASSERT_EQ(s.events.size_rows(), pt->s.events.size_rows());
    for (size_t r = 0; r < s.events.size_rows(); ++r) {
      ASSERT_EQ(s.events.addr[r], pt->s.events.addr[r]);
      ASSERT_EQ(s.events.time_us[r], pt->s.events.time_us[r]);
    }
    EXPECT_TRUE(s.unknown_keys.empty());
    // A rewrite keeps both parts.
    auto again = load_snapshot(write_snapshot(s));
    ASSERT_TRUE(again.ok()) << again.error().describe();
    ASSERT_TRUE(again.value().outside);
    EXPECT_EQ(again.value().outside->events.size_rows(), s.outside->events.size_rows());
    EXPECT_EQ(again.value().events.size_rows(), s.events.size_rows());
  }
}

// An audit's cases: `merge` took any two files. A capture and PyTorch's snapshot of two different jobs (their times
// apart), and the same with PyTorch's times moved into the capture's (so only its segments tell), are refused.
TEST(Outside, FilesOfTwoProcessesAreNotMerged) {
  const Loaded* cap = load("capture_torch_pair/nccl");
  const Loaded* other = load("capture_torch_pair/torch.torch");
  const Loaded* own = load("capture_torch_pair/nccl.torch");
  ASSERT_TRUE(cap && other && own);
  EXPECT_TRUE(same_process(cap->s, own->s).ok());
  const Status apart = same_process(cap->s, other->s);
  ASSERT_FALSE(apart.ok());
  EXPECT_NE(apart.error().message.find("do not overlap in time"), std::string::npos) << apart.error().message;
  auto refused = merge_capture(raw_pickle(pair_path("torch", ".torch.pickle.gz")), cap->s);
  EXPECT_FALSE(refused.ok());
  Snapshot moved = other->s;
  const int64_t shift = cap->s.events.time_us[cap->s.devices[0].begin] - moved.events.time_us[moved.devices[0].begin];
  for (auto& t : moved.events.time_us) t += shift;
  const Status segs = same_process(cap->s, moved);
  ASSERT_FALSE(segs.ok());
  EXPECT_NE(segs.error().message.find("is among the capture's allocations"), std::string::npos) << segs.error().message;
}

// A capture without stacks (`--stacks none`, or an unwinder that failed) has no owners: PyTorch's own record
// (its segment allocations, by device, address, size and time) tells its pool apart, so the outside part is the same
// allocations as with stacks. Before, all of PyTorch's pool came out as "unknown (no stack)" on top of PyTorch's.
TEST(Outside, WithoutStacksPyTorchsRecordTellsItsPool) {
  for (const char* job : kJobs) {
    SCOPED_TRACE(job);
    const Loaded* cap = load(std::string("capture_torch_pair/") + job);
    const Loaded* pt = load(std::string("capture_torch_pair/") + job + ".torch");
    ASSERT_TRUE(cap && pt);
    Snapshot bare = cap->s;
    const StackId none = bare.stacks.intern({});
    for (auto& st : bare.events.stack) st = none;
    for (Block& b : bare.blocks) b.stack = none;
    for (Segment& seg : bare.segments) seg.stack = none;
    const Snapshot with = outside_of_pytorch(cap->s, pt->s);
    const Snapshot without = outside_of_pytorch(bare, pt->s);
    ASSERT_EQ(without.events.size_rows(), with.events.size_rows());
    for (size_t r = 0; r < with.events.size_rows(); ++r) {
      EXPECT_EQ(without.events.addr[r], with.events.addr[r]);
      EXPECT_EQ(without.events.size[r], with.events.size[r]);
    }
    EXPECT_EQ(without.segments.size(), with.segments.size());
    if (std::string(job) != "oom") EXPECT_GT(with.events.size_rows(), 0u);  // the OOM job uses nothing else
    EXPECT_LT(with.events.size_rows(), cap->s.events.size_rows());
  }
}

// An audit's cases: memory outside PyTorch on a device PyTorch recorded nothing on vanished from every answer; and
// with PyTorch's caching allocator off (PYTORCH_NO_CUDA_MEMORY_CACHING=1: its snapshot is empty), PyTorch's own
// cudaMalloc calls were dropped as "already in PyTorch's part", where they are not.
TEST(Outside, MemoryPyTorchsSnapshotDoesNotShowIsAnswered) {
  const int64_t t0 = 1'795'000'000'000'000;
  clitest::SnapshotBuilder cap;
  cap.s.allocator_settings.push_back(Setting{"allocscope_capture", Setting::Kind::kBool, 1});
  const StackId torch = cap.stack({{"c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(...)",
                                    "/v/site-packages/torch/lib/libc10_cuda.so", 0},
                                   {"train", "/home/me/job.py", 7}});
  const StackId user = cap.stack({{"cudaMalloc", "/v/nvidia/cu13/lib/libcudart.so.13", 0}, {"main", "/home/me/app.cu", 3}});
  cap.device();
  cap.event(Action::kSegmentAlloc, 0xA000000, 2 << 20, torch);
  cap.event(Action::kAlloc, 0xA000000, 2 << 20, torch);
  cap.device();
  cap.event(Action::kSegmentAlloc, 0xB000000, 4 << 20, user);
  cap.event(Action::kAlloc, 0xB000000, 4 << 20, user);
  for (size_t r = 0; r < cap.s.events.size_rows(); ++r) cap.s.events.time_us[r] = t0 + static_cast<int64_t>(r);
  ASSERT_TRUE(is_capture(cap.s));

  clitest::SnapshotBuilder pt;  // PyTorch's pool on device 0 only
  pt.segment(0xA000000, 0, 2 << 20, {{2 << 20, 2 << 20, BlockState::kActiveAllocated, 0}});
  pt.device();
  pt.event(Action::kSegmentAlloc, 0xA000000, 2 << 20);
  pt.event(Action::kAlloc, 0xA000000, 2 << 20);
  for (auto& t : pt.s.events.time_us) t = t0 + 20;
  auto merged = merge_capture(write_snapshot(pt.s), cap.s);
  ASSERT_TRUE(merged.ok()) << merged.error().describe();
  auto m = load_snapshot(merged.value().bytes);
  ASSERT_TRUE(m.ok());
  Lifetimes lt = build_lifetimes(m.value());
  ASSERT_EQ(lt.devices.size(), 2u);
  Summary sum = summarize(m.value(), lt, FrameFilter(m.value()));
  ASSERT_EQ(sum.devices.size(), 2u);
  EXPECT_EQ(sum.devices[0].outside_peak, 0u);  // PyTorch's own pool, in PyTorch's part
  EXPECT_EQ(sum.devices[1].device, 1);
  EXPECT_EQ(sum.devices[1].outside_peak, 4u << 20);
  EXPECT_EQ(sum.devices[1].outside_at_peak, 4u << 20);

  clitest::SnapshotBuilder empty;  // caching off: PyTorch's snapshot holds nothing
  empty.device();
  auto nocache = merge_capture(write_snapshot(empty.s), cap.s);
  ASSERT_TRUE(nocache.ok()) << nocache.error().describe();
  auto n = load_snapshot(nocache.value().bytes);
  ASSERT_TRUE(n.ok());
  lt = build_lifetimes(n.value());
  sum = summarize(n.value(), lt, FrameFilter(n.value()));
  ASSERT_EQ(sum.devices.size(), 2u);
  EXPECT_EQ(sum.devices[0].outside_peak, 2u << 20);  // PyTorch's cudaMalloc, seen only by the capture
  EXPECT_EQ(sum.devices[1].outside_peak, 4u << 20);
}

// An audit's cases, each modelled on what the driver and PyTorch's allocator record for one process:
// (1) a long job: PyTorch's trace ring holds only steps a minute after the capture's last cudaMalloc (no new
// segments), which was refused as "another run", the default `record` merge at exit included; it is one process
// when PyTorch reserved nothing in that time and holds only segments the capture holds. (2) With expandable segments
// and no stacks, PyTorch's one segment_map of 40 MiB is two cuMemMap pages of 20 MiB to the driver, and its held
// segment two live maps: all of it counted as outside before. (3) Its OOM of a 9381867520-byte request (rounded to
// 512 bytes) is a failed cudaMalloc of 9382658048 (rounded to 2 MiB).
TEST(Outside, OneProcessAsTheDriverAndPyTorchRecordIt) {
  const int64_t t0 = 1'795'000'000'000'000;
  const uint64_t A = 0xA0000000, E = 0xE0000000, MiB = 1 << 20;
  auto capture = [&] {
    clitest::SnapshotBuilder cap;  // no stacks: every row's stack is empty
    cap.s.allocator_settings.push_back(Setting{"allocscope_capture", Setting::Kind::kBool, 1});
    cap.segment(A, 0, 2 * MiB, {{2 * MiB, 2 * MiB, BlockState::kActiveAllocated, 0}});
    cap.segment(E, 0, 20 * MiB, {{20 * MiB, 20 * MiB, BlockState::kActiveAllocated, 0}});
    cap.segment(E + 20 * MiB, 0, 20 * MiB, {{20 * MiB, 20 * MiB, BlockState::kActiveAllocated, 0}});
    cap.device();
    cap.event(Action::kSegmentAlloc, A, 2 * MiB);
    cap.event(Action::kAlloc, A, 2 * MiB);
    for (uint64_t page : {E, E + 20 * MiB}) {
      cap.event(Action::kSegmentMap, page, 20 * MiB);
      cap.event(Action::kAlloc, page, 20 * MiB);
    }
    cap.event(Action::kOom, 0, 9382658048ull);
    for (size_t r = 0; r < cap.s.events.size_rows(); ++r) cap.s.events.time_us[r] = t0 + static_cast<int64_t>(r);
    return cap;
  };
  const clitest::SnapshotBuilder cap = capture();
  clitest::SnapshotBuilder pt;
  pt.segment(A, 0, 2 * MiB, {{2 * MiB, 2 * MiB, BlockState::kActiveAllocated, 0}});
  pt.segment(E, 0, 40 * MiB, {{40 * MiB, 40 * MiB, BlockState::kActiveAllocated, 0}});
  pt.device();
  pt.event(Action::kSegmentAlloc, A, 2 * MiB);
  pt.event(Action::kSegmentMap, E, 40 * MiB);
  pt.event(Action::kOom, 0, 9381867520ull);
  for (size_t r = 0; r < pt.s.events.size_rows(); ++r) pt.s.events.time_us[r] = t0 + 10 + static_cast<int64_t>(r);
  ASSERT_TRUE(same_process(cap.s, pt.s).ok());
  const Snapshot outside = outside_of_pytorch(cap.s, pt.s);
  EXPECT_EQ(outside.segments.size(), 0u);
  EXPECT_EQ(outside.events.size_rows(), 0u) << "the pages and the failed cudaMalloc are PyTorch's";

  // (1) PyTorch's ring, a minute later, holds only blocks handed out inside its segments.
  clitest::SnapshotBuilder late;
  late.s.segments = pt.s.segments;
  late.s.blocks = pt.s.blocks;
  late.device();
  late.event(Action::kAlloc, A, 512);
  late.event(Action::kFreeRequested, A, 512);
  late.event(Action::kFreeCompleted, A, 512);
  for (size_t r = 0; r < late.s.events.size_rows(); ++r) late.s.events.time_us[r] = t0 + 60'000'000 + int64_t(r);
  const Status one = same_process(cap.s, late.s);
  EXPECT_TRUE(one.ok()) << one.error().message;
  auto merged = merge_capture(write_snapshot(late.s), cap.s);
  ASSERT_TRUE(merged.ok()) << merged.error().describe();
  // Still refused: PyTorch's late trace reserves a segment the capture never saw, or it holds one the capture does
  // not hold (another run of the same job, a minute later).
  clitest::SnapshotBuilder grew = late;
  grew.event(Action::kSegmentAlloc, 0xB0000000, 2 * MiB);
  grew.s.events.time_us.back() = t0 + 61'000'000;
  const Status g = same_process(cap.s, grew.s);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().message.find("reserves memory the capture never saw"), std::string::npos) << g.error().message;
  clitest::SnapshotBuilder other = late;
  other.segment(0xC0000000, 0, 2 * MiB, {{2 * MiB, 2 * MiB, BlockState::kActiveAllocated, 0}});
  const Status o = same_process(cap.s, other.s);
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.error().message.find("holds a segment the capture does not"), std::string::npos) << o.error().message;
}

// `merge` of a dict that is not a memory snapshot (an optimizer state, `{}`) wrote it with our key added.
TEST(Outside, MergeRefusesADictThatIsNotASnapshot) {
  const Loaded* cap = load("capture_torch_pair/torch");
  ASSERT_TRUE(cap);
  pickle::Writer w;
  w.begin_dict();
  w.key("state"), w.begin_dict(), w.end_dict();
  w.key("param_groups"), w.begin_list(), w.end_list();
  w.end_dict();
  auto r = merge_capture(w.finish(), cap->s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("neither 'segments' nor 'device_traces'"), std::string::npos) << r.error().message;
}

// Bytes after PyTorch's STOP opcode: no unpickler reads them (Python's pickle stops there), so the merge appends at
// STOP and leaves them out. They were refused, with the file's end as the offset (a known gap). The oracle is the
// same file's merge without them.
TEST(Outside, BytesAfterPyTorchsStopAreLeftOut) {
  const Loaded* cap = load("capture_torch_pair/torch");
  ASSERT_TRUE(cap);
  const std::vector<uint8_t> torch = raw_pickle(pair_path("torch", ".torch.pickle.gz"));
  std::vector<uint8_t> padded = torch;
  for (char c : std::string("\n# trailing"))  padded.push_back(static_cast<uint8_t>(c));
  auto clean = merge_capture(torch, cap->s);
  auto trailing = merge_capture(padded, cap->s);
  ASSERT_TRUE(clean.ok() && trailing.ok()) << (trailing.ok() ? "" : trailing.error().describe());
  EXPECT_EQ(clean.value().after_stop, 0u);
  EXPECT_EQ(trailing.value().after_stop, 11u);
  EXPECT_TRUE(trailing.value().bytes == clean.value().bytes);
}

// A gzipped "PyTorch snapshot" that is no pickle at all (here 1 GiB of zeros in 64 gzip members, 1 MB on disk) is
// refused at its first bytes: `merge` inflated it whole first, and ran out of memory under a 512 MiB limit before
// looking at it. The limit is the oracle: the refusal must come from the pickle's first byte, not from malloc.
TEST(Outside, MergeVerbRefusesAGzipBombAtItsFirstByte) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer's shadow memory does not fit an address-space limit";
#endif
  auto member = gzip(std::vector<uint8_t>(16u << 20, 0), 9);
  ASSERT_TRUE(member.ok());
  const std::string dir = ::testing::TempDir() + "outside_bomb_" + std::to_string(getpid());
  const std::string bomb = dir + ".pickle.gz", out = dir + ".out.pickle";
  {
    std::ofstream f(bomb, std::ios::binary);
    for (int i = 0; i < 64; ++i) f.write(reinterpret_cast<const char*>(member.value().data()), member.value().size());
  }
  const CliRun r = run_program("prlimit", {"--as=" + std::to_string(512u << 20), ALLOCSCOPE_CLI, "merge",
                                           pair_path("torch", ".pickle.gz"), bomb, "-o", out});
  std::remove(bomb.c_str());
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_EQ(r.err.find("out of memory"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("at byte 0"), std::string::npos) << r.err;
  FILE* written = std::fopen(out.c_str(), "rb");
  EXPECT_EQ(written, nullptr);
  if (written) std::fclose(written), std::remove(out.c_str());
}

// A merged file no longer warns that its outside rows were "left out": they are the outside part.
TEST(Outside, AMergedFileHasNoWarningAboutItsOutsideRows) {
  const Loaded* m = load("capture_merged/nccl");
  ASSERT_TRUE(m && m->s.outside);
  EXPECT_GT(m->s.outside->events.size_rows(), 0u);
  for (const std::string& w : m->s.warnings) EXPECT_EQ(w.find("outside device_traces"), std::string::npos) << w;
}

// The same two cases recorded by `allocscope record` on an H200 (tests/capture/pyframes/run_merge_cases_gpu.sh;
// the merge ran in the job, at its exit). steady: PyTorch's ring of 2000 entries starts 3 s after the capture's last
// event, and the file was merged. exp_none: expandable segments, no stacks: outside PyTorch is the 134532616 bytes the
// same job with stacks gave to cuBLAS (134481920) and cuDNN (50696), not PyTorch's 724 MiB of pages again.
TEST(Outside, RecordMergedALongJobAndAStacklessExpandableOneOnTheGpu) {
  const Loaded* steady = load("capture_merged/steady");
  ASSERT_TRUE(steady && steady->s.outside);
  int64_t pt_first = INT64_MAX, outside_last = 0;
  for (uint64_t r = 0; r < steady->s.events.size_rows(); ++r) {
    pt_first = std::min(pt_first, steady->s.events.time_us[r]);
    EXPECT_NE(steady->s.events.action[r], Action::kSegmentAlloc);
  }
  for (int64_t t : steady->s.outside->events.time_us) outside_last = std::max(outside_last, t);
  EXPECT_GT(pt_first - outside_last, 2'000'000);
  const Loaded* exp = load("capture_merged/exp_none");
  ASSERT_TRUE(exp && exp->s.outside);
  const Summary sum = summarize(exp->s, exp->lifetimes, exp->ff);
  ASSERT_EQ(sum.devices.size(), 1u);
  std::map<Owner, uint64_t> owners(sum.devices[0].owners_at_peak.begin(), sum.devices[0].owners_at_peak.end());
  EXPECT_EQ(owners[Owner::kPyTorch], label_of("capture_merged", "exp_none")["memory_reserved"].get<uint64_t>());
  EXPECT_EQ(sum.devices[0].outside_at_peak, 134532616u);
}

// Python's own unpickler is the oracle for "PyTorch's tools read it": the merged dict minus our key is PyTorch's.
TEST(Outside, PythonReadsPyTorchsDictAndOurKey) {
  if (std::system("python3 -c 'import pickle, pickletools' >/dev/null 2>&1") != 0) GTEST_SKIP() << "no python3";
  const std::string path = ::testing::TempDir() + "outside_merged_" + std::to_string(getpid()) + ".pickle";
  {
    const std::vector<uint8_t> bytes = merged_bytes("nccl");
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  const std::string script =
      "import gzip, io, pickle, pickletools, sys\n"
      "raw = open(sys.argv[1], 'rb').read()\n"
      "m = pickle.loads(raw)\n"
      "t = pickle.load(gzip.open(sys.argv[2]))\n"
      "o = m.pop('allocscope_outside')\n"
      "assert m == t, 'PyTorch part differs'\n"
      "assert o['allocator_settings']['allocscope_capture'], 'no capture settings'\n"
      "assert sum(s['total_size'] for s in o['segments']) > 0\n"
      "pickletools.dis(raw, out=io.StringIO())  # no memo slot written twice\n";
  const std::string py = ::testing::TempDir() + "outside_check_" + std::to_string(getpid()) + ".py";
  std::ofstream(py) << script;
  const CliRun r = run_program("python3", {py, path, pair_path("nccl", ".torch.pickle.gz")});
  std::remove(py.c_str());
  std::remove(path.c_str());
  EXPECT_EQ(r.code, 0) << r.out << r.err;
}

TEST(Outside, LoaderRefusesAnOutsideThatIsNotADict) {
  pickle::Writer w;
  w.begin_dict();
  w.key("segments"), w.begin_list(), w.end_list();
  w.key("device_traces"), w.begin_list(), w.end_list();
  w.key("allocscope_outside"), w.begin_list(), w.end_list();
  w.end_dict();
  auto s = load_snapshot(w.finish());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("'allocscope_outside' is a list; expected a dict"), std::string::npos)
      << s.error().describe();
  EXPECT_NE(s.error().offset, Error::kNoOffset);
}

// A crafted outside part whose trace lists one entry many times through the memo: refused, never multiplied.
TEST(Outside, LoaderRefusesAnOutsideEntryListedTwice) {
  pickle::Writer w;
  w.begin_dict();
  w.key("segments"), w.begin_list(), w.end_list();
  w.key("device_traces"), w.begin_list(), w.end_list();
  w.key("allocscope_outside");
  w.begin_dict();
  w.key("device_traces");
  w.begin_list();
  w.begin_list();
  const uint32_t entry = w.begin_dict();
  w.key("action"), w.str("alloc");
  w.key("addr"), w.uinteger(4096);
  w.key("size"), w.uinteger(512);
  w.end_dict();
  for (int i = 0; i < 3; ++i) w.get_memo(entry);
  w.end_list();
  w.end_list();
  w.end_dict();
  w.end_dict();
  auto s = load_snapshot(w.finish());
  ASSERT_FALSE(s.ok());
  // The reader refuses the repeated entries before the outside part is read (builder_tree.cpp checks again).
  EXPECT_NE(s.error().offset, Error::kNoOffset) << s.error().describe();
  EXPECT_NE(s.error().message.find("entries"), std::string::npos) << s.error().describe();
}

TEST(Outside, MergeVerbAndSummary) {
  const std::string out = ::testing::TempDir() + "outside_cli_" + std::to_string(getpid()) + ".pickle.gz";
  const CliRun m = run({"merge", pair_path("nccl", ".pickle.gz"), pair_path("nccl", ".torch.pickle.gz"), "-o", out});
  ASSERT_EQ(m.code, 0) << m.err;
  const nlohmann::json j = json_of(run({"summary", "--json", out}));
  // Merging a merged file again: said plainly, nothing written.
  const std::string again = out + ".again.pickle";
  const CliRun twice = run({"merge", pair_path("nccl", ".pickle.gz"), out, "-o", again});
  EXPECT_EQ(twice.code, 1);
  EXPECT_NE(twice.err.find("already merged"), std::string::npos) << twice.err;
  std::remove(again.c_str());
  std::remove(out.c_str());
  const auto& d = j["devices"][0];
  std::map<std::string, uint64_t> owners;
  for (const auto& o : d["owners_at_peak"]) owners[o["owner"].get<std::string>()] = o["bytes"].get<uint64_t>();
  // PyTorch's own memory_reserved() (nccl.label.json) is 460 MiB, as at the peak; NCCL's 388 MiB of buffers and
  // cuBLAS's workspaces are outside it.
  EXPECT_EQ(owners["pytorch"], 460ull << 20);
  EXPECT_EQ(owners["pytorch"], 482344960u);
  EXPECT_EQ(owners["nccl"], 388ull << 20);
  EXPECT_GT(owners["cublas"], 0u);
  EXPECT_EQ(d["outside"]["at_peak"].get<uint64_t>(), owners["nccl"] + owners["cublas"]);
  EXPECT_EQ(d["outside"]["sites_at_peak"][0]["site"]["filename"].get<std::string>().find("nccl_job.py") !=
                std::string::npos,
            true);
  // Each site says whose memory it is (an audit: the list mixed NCCL's and cuBLAS's lines without naming them), and
  // the owners' bytes over the listed sites add up to the owner rows.
  std::map<std::string, uint64_t> by_owner_of_sites;
  for (const auto& site : d["outside"]["sites_at_peak"]) {
    ASSERT_EQ(site["owners"].size(), 1u) << site.dump();
    by_owner_of_sites[site["owners"][0].get<std::string>()] += site["bytes"].get<uint64_t>();
  }
  EXPECT_EQ(d["outside"]["sites_at_peak"][0]["owners"][0], "nccl");
  EXPECT_EQ(by_owner_of_sites["nccl"], owners["nccl"]);
  // Arguments swapped: said plainly.
  const CliRun bad = run({"merge", pair_path("nccl", ".torch.pickle.gz"), pair_path("nccl", ".pickle.gz"), "-o", out});
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("not written by allocscope's capture"), std::string::npos) << bad.err;
}

// `allocscope record -- python3 JOB` on an H100 with the bootstrap (tests/capture/pyframes/run_merged_gpu.sh, which
// kept PyTorch's file too): the capture itself wrote the merged file at the job's exit. PyTorch's counters in the
// labels are the oracle for PyTorch's share; NCCL's buffers are the 388 MiB the NCCL-only fixtures show.
TEST(Outside, RecordWroteOneMergedSnapshotOnTheGpu) {
  for (const char* job : {"torch", "nccl"}) {
    SCOPED_TRACE(job);
    const Loaded* m = load(std::string("capture_merged/") + job);
    const Loaded* pt = load(std::string("capture_merged/") + job + ".torch");
    ASSERT_TRUE(m && pt);
    ASSERT_TRUE(m->s.outside);
    EXPECT_TRUE(is_capture(*m->s.outside));
    EXPECT_EQ(m->s.events.size_rows(), pt->s.events.size_rows());
    EXPECT_EQ(m->s.segments.size(), pt->s.segments.size());
    const nlohmann::json label = label_of("capture_merged", job);
    const Summary sum = summarize(m->s, m->lifetimes, m->ff);
    ASSERT_EQ(sum.devices.size(), 1u);
    const DeviceSummary& d = sum.devices[0];
    std::map<Owner, uint64_t> owners(d.owners_at_peak.begin(), d.owners_at_peak.end());
    // Both jobs end at their reserved peak: PyTorch's memory_reserved() at exit is its share at the peak.
    EXPECT_EQ(owners[Owner::kPyTorch], label["memory_reserved"].get<uint64_t>());
    EXPECT_GT(owners[Owner::kCublas], 0u);
    if (std::string(job) == "nccl") {
      EXPECT_EQ(owners[Owner::kNccl], 388ull << 20);
    }
    uint64_t outside = 0;
    for (const auto& [o, b] : d.owners_at_peak)
      if (o != Owner::kPyTorch) outside += b;
    EXPECT_EQ(d.outside_at_peak, outside);
    EXPECT_FALSE(warns_leak(sum));
  }
  // The OOM job, run the default way: only the merged file, with PyTorch's oom entry; nothing outside was allocated.
  const Loaded* oom = load("capture_merged/oom");
  ASSERT_TRUE(oom && oom->s.outside);
  const auto reports = analyze_ooms(oom->s, oom->lifetimes);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_TRUE(reports[0].has_outside);
  EXPECT_EQ(reports[0].captured_outside, 0u);
  EXPECT_EQ(reports[0].requested, 8ull << 30);
}

}  // namespace
}  // namespace allocscope::test
