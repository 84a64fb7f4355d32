// The C ABI and session on the CPU (no CUDA backend linked): start/dump/stop, ranges, options from the environment,
// and a dump requested by a signal, which a helper thread performs outside the handler.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "allocscope/loader.h"
#include "allocscope/ranks.h"
#include "allocscope/writer.h"
#include "allocscope_capture.h"
#include "allocscope_capture.hpp"
#include "options.h"
#include "session.h"
#include "../cli/synthetic.h"

using namespace allocscope;
using namespace allocscope::capture;

namespace {

std::string tmp_path(const std::string& name) {
  const char* d = std::getenv("TMPDIR");
  return std::string(d && *d ? d : "/tmp") + "/allocscope_session_" + std::to_string(getpid()) + "_" + name;
}

// Removes its paths when the test ends, also when an assertion stops it early (a failed run of
// NoRecordedEventIsLostAtExitOrOnTheDumpSignal left its dumps in /tmp that way).
struct RemoveAtEnd {
  std::vector<std::string> paths;
  ~RemoveAtEnd() {
    for (const std::string& p : paths) std::remove(p.c_str());
  }
};

bool exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}

__attribute__((noinline)) void session_test_alloc(uint64_t addr, uint64_t size) {
  Recorder* r = Session::get().recorder();
  ASSERT_NE(r, nullptr);
  Site s;
  s.api = Api::kMemAllocAsync;
  r->on_alloc(s, addr, size, SegmentKind::kAsync, 0);
}

}  // namespace

TEST(CaptureOptions, ReadsTheEnvironment) {
  setenv("ALLOCSCOPE_OUTPUT", "/tmp/x-%p.pickle.gz", 1);
  setenv("ALLOCSCOPE_MAX_ENTRIES", "123", 1);
  setenv("ALLOCSCOPE_STACKS", "none", 1);
  setenv("ALLOCSCOPE_DUMP_SIGNAL", "SIGUSR2", 1);
  setenv("ALLOCSCOPE_DUMP_AT_EXIT", "0", 1);
  auto o = options_from_env();
  ASSERT_TRUE(o.ok()) << o.error().describe();
  EXPECT_EQ(o->output_path, "/tmp/x-%p.pickle.gz");
  EXPECT_EQ(o->max_entries, 123u);
  EXPECT_EQ(o->stacks, StackMode::kNone);
  EXPECT_EQ(o->dump_signal, SIGUSR2);
  EXPECT_FALSE(o->dump_at_exit);
  EXPECT_EQ(expand_output_path("a-%p.pickle"), "a-" + std::to_string(getpid()) + ".pickle");
  setenv("ALLOCSCOPE_STACKS", "pyhton", 1);
  auto bad = options_from_env();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("ALLOCSCOPE_STACKS"), std::string::npos);
  for (const char* v : {"ALLOCSCOPE_OUTPUT", "ALLOCSCOPE_MAX_ENTRIES", "ALLOCSCOPE_STACKS", "ALLOCSCOPE_DUMP_SIGNAL",
                        "ALLOCSCOPE_DUMP_AT_EXIT"})
    unsetenv(v);
  EXPECT_EQ(parse_signal("USR1"), SIGUSR1);
  EXPECT_EQ(parse_signal("none"), 0);
  EXPECT_EQ(parse_signal("bogus"), -1);
}

// Values strtoull alone would take (a sign, spaces, overflow, a ring of 10^12 entries that ends the job at cuInit),
// and dump signals a job cannot spare: each is an error that names the variable, never a terminated job.
TEST(CaptureOptions, RefusesValuesThatWouldEndTheJob) {
  for (const char* v : {" -1", "-1", "+5", " 5", "99999999999999999999", "1000000000000", "100000001", "0", "1e6"}) {
    setenv("ALLOCSCOPE_MAX_ENTRIES", v, 1);
    auto o = options_from_env();
    ASSERT_FALSE(o.ok()) << "'" << v << "' was taken as " << o->max_entries;
    EXPECT_NE(o.error().message.find("ALLOCSCOPE_MAX_ENTRIES"), std::string::npos) << o.error().message;
  }
  setenv("ALLOCSCOPE_MAX_ENTRIES", "100000000", 1);
  ASSERT_TRUE(options_from_env().ok());
  unsetenv("ALLOCSCOPE_MAX_ENTRIES");
  for (const char* sig : {"9", "19", "11", "2", "15", "SIGKILL", "KILL", "SEGV", "17", "65", "99999999999"})
    EXPECT_EQ(parse_signal(sig), -1) << sig;
  EXPECT_EQ(parse_signal("10"), SIGUSR1);
  EXPECT_EQ(parse_signal(std::to_string(SIGRTMIN + 1)), SIGRTMIN + 1);
  // The C API's values pass the same bounds: start() refuses them, and nothing starts.
  allocscope_capture_options o;
  allocscope_capture_default_options(&o);
  o.max_entries = 1'000'000'000'000ull;
  EXPECT_EQ(allocscope_capture_start(&o), -1);
  EXPECT_NE(std::string(allocscope_capture_last_error()).find("max_entries"), std::string::npos);
  allocscope_capture_default_options(&o);
  o.dump_signal = SIGKILL;
  EXPECT_EQ(allocscope_capture_start(&o), -1);
  EXPECT_NE(std::string(allocscope_capture_last_error()).find("dump_signal 9"), std::string::npos);
  EXPECT_EQ(Session::get().recorder(), nullptr);
}

// What the Python bootstrap does in a PyTorch job (native/capture/python/sitecustomize.py): PyTorch's recorder dumps,
// then the capture writes its output as PyTorch's file plus the memory outside PyTorch (here a 4 MiB allocation made
// by this test's own code, owner "user"), and its own exit dump will leave that file alone.
TEST(CaptureSession, DumpMergedIsPyTorchsSnapshotWithTheOutsideMemory) {
  const std::string out = tmp_path("merged.pickle.gz");
  const std::string torch = tmp_path("torch.pickle");
  allocscope_capture_options o;
  allocscope_capture_default_options(&o);
  o.output_path = out.c_str();
  o.dump_at_exit = 0;
  ASSERT_EQ(allocscope_capture_start(&o), 0) << allocscope_capture_last_error();
  session_test_alloc(0x9000000, 4 << 20);
  // PyTorch's pool as both recorders see it: its own record (a segment of 2 MiB, stamped now) and, in the capture,
  // an allocation by this test's code (no PyTorch frames), which the record alone marks as PyTorch's.
  session_test_alloc(0xA000000, 2 << 20);
  clitest::SnapshotBuilder b;
  b.segment(0xA000000, 0, 2 << 20, {{2 << 20, 2 << 20, BlockState::kActiveAllocated, 0}});
  b.device();
  b.event(Action::kSegmentAlloc, 0xA000000, 2 << 20);
  b.event(Action::kAlloc, 0xA000000, 2 << 20);
  for (auto& t : b.s.events.time_us) t = now_us();
  ASSERT_TRUE(write_snapshot_file(b.s, torch).ok());
  EXPECT_EQ(allocscope_capture_dump_merged("/nonexistent/torch.pickle", 0), -1);
  EXPECT_NE(std::string(allocscope_capture_last_error()).find("/nonexistent/torch.pickle"), std::string::npos);
  EXPECT_FALSE(Session::get().merged_final());
  // A PyTorch snapshot of another run (its times a day earlier) is refused, not merged.
  const std::string other = std::string(ALLOCSCOPE_FIXTURES) + "/capture_torch_pair/torch.torch.pickle.gz";
  EXPECT_EQ(allocscope_capture_dump_merged(other.c_str(), 0), -1);
  EXPECT_NE(std::string(allocscope_capture_last_error()).find("do not overlap in time"), std::string::npos)
      << allocscope_capture_last_error();
  ASSERT_EQ(allocscope_capture_dump_merged(torch.c_str(), 1), 0) << allocscope_capture_last_error();
  EXPECT_TRUE(Session::get().merged_final());
  auto merged = load_snapshot_file(out);
  auto pt = load_snapshot_file(torch);
  ASSERT_TRUE(merged.ok() && pt.ok());
  EXPECT_EQ(merged->segments.size(), pt->segments.size());
  EXPECT_EQ(merged->events.size_rows(), pt->events.size_rows());
  ASSERT_TRUE(merged->outside);
  ASSERT_EQ(merged->outside->segments.size(), 1u);
  EXPECT_EQ(merged->outside->segments[0].address, 0x9000000u);
  EXPECT_EQ(merged->outside->segments[0].total_size, 4u << 20);
  EXPECT_EQ(merged->outside->events.size_rows(), 2u);  // segment_alloc, alloc
  EXPECT_EQ(allocscope_capture_stop(), 0);
  std::remove(out.c_str());
  std::remove(torch.c_str());
}

TEST(CaptureSession, CAbiStartDumpStopWithRangesAndSignalDump) {
  const std::string path = tmp_path("abi.pickle.gz");
  const std::string sig_path = tmp_path("signal.pickle");
  allocscope_capture_options o;
  allocscope_capture_default_options(&o);
  o.output_path = sig_path.c_str();
  o.max_entries = 1000;
  o.dump_at_exit = 0;
  o.dump_signal = SIGUSR1;
  ASSERT_EQ(allocscope_capture_start(&o), 0) << allocscope_capture_last_error();
  EXPECT_EQ(allocscope_capture_active(), 1);
  {
    allocscope::capture::Scope step("step");
    allocscope_capture_push("backward");
    session_test_alloc(0x7000, 1 << 20);
    allocscope_capture_pop();
  }
  ASSERT_EQ(allocscope_capture_dump(path.c_str()), 0) << allocscope_capture_last_error();
  auto s = load_snapshot_file(path);
  ASSERT_TRUE(s.ok()) << s.error().describe();
  ASSERT_EQ(s->events.size_rows(), 2u);
  EXPECT_EQ(s->annotations.size(), 4u);
  EXPECT_NE(std::string(s->str(s->events.user_metadata[0])).find("nvtx=step/backward"), std::string::npos);
  EXPECT_NE(std::string(s->str(s->events.user_metadata[0])).find("api=cuMemAllocAsync"), std::string::npos);

  // The handler only writes to a pipe; the helper thread dumps to the configured path.
  std::remove(sig_path.c_str());
  ASSERT_EQ(raise(SIGUSR1), 0);
  for (int i = 0; i < 1000 && !exists(sig_path); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(exists(sig_path));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the rename is atomic; this only lets the log print
  auto sig = load_snapshot_file(sig_path);
  ASSERT_TRUE(sig.ok()) << sig.error().describe();
  EXPECT_EQ(sig->segments.size(), 1u);

  EXPECT_EQ(allocscope_capture_stop(), 0);
  EXPECT_EQ(allocscope_capture_active(), 0);
  // What was recorded can still be dumped after stop.
  EXPECT_EQ(allocscope_capture_dump(path.c_str()), 0);
  std::remove(path.c_str());
  std::remove(sig_path.c_str());
  // An unwritable path is an error in words.
  EXPECT_EQ(allocscope_capture_dump("/nonexistent-dir/x.pickle"), -1);
  EXPECT_STRNE(allocscope_capture_last_error(), "");
}

// ---- The capture inside a job's process life: fork, exit, unwritable output, concurrent dumps (issue #6). ----
// Each scenario runs as a forked "job" process, so the test binary's own session and exit are left alone; alarm()
// turns a deadlock into a failure instead of a hang.

namespace {

#ifdef __has_feature  // clang; GCC names its sanitizers with __SANITIZE_*__ instead
#define SESSION_TEST_HAS_FEATURE(x) __has_feature(x)
#else
#define SESSION_TEST_HAS_FEATURE(x) 0
#endif

// ThreadSanitizer cannot follow a fork() taken while threads run: in the child it reports the parent's threads as
// leaked (exit status 66) and refuses to start new ones. The tests that fork under running threads skip under it.
#if defined(__SANITIZE_THREAD__) || SESSION_TEST_HAS_FEATURE(thread_sanitizer)
constexpr bool kTsan = true;
#else
constexpr bool kTsan = false;
#endif
// GCC 12's AddressSanitizer runtime does not hold its allocator's locks across fork(): a child forked while another
// thread is inside malloc can wait forever in its own first allocation (a fresh-clone CI run's child hung until its
// alarm). Its LeakSanitizer also reports the other threads' thread-local memory in such a child. The test that forks
// while threads allocate runs in the default build, where glibc's malloc is fork-safe.
#if defined(__SANITIZE_ADDRESS__) || SESSION_TEST_HAS_FEATURE(address_sanitizer)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif

// Runs `job` in a child process; returns its wait status. The child exits through exit() (atexit handlers run).
template <typename F>
int run_job(F job, int timeout_s = 60) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(static_cast<unsigned>(timeout_s));
    job();
    std::exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int count_of(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

// Files next to `path` whose name starts with its name + ".partial" (temporaries left behind).
int leftover_temporaries(const std::string& path) {
  const std::filesystem::path p(path);
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(p.parent_path()))
    if (e.path().filename().string().rfind(p.filename().string() + ".partial", 0) == 0) ++n;
  return n;
}

void start_or_die(const std::string& out, int dump_at_exit, int dump_signal = 0, int stacks = -1) {
  allocscope_capture_options o;
  allocscope_capture_default_options(&o);
  o.output_path = out.c_str();
  o.max_entries = 1 << 20;
  o.dump_at_exit = dump_at_exit;
  o.dump_on_oom = 1;
  o.dump_signal = dump_signal;
  o.stacks = stacks;
  if (allocscope_capture_start(&o) != 0) {
    std::fprintf(stderr, "start failed: %s\n", allocscope_capture_last_error());
    std::exit(90);
  }
}

#define JOB_CHECK(cond, code)                                              \
  do {                                                                     \
    if (!(cond)) {                                                         \
      std::fprintf(stderr, "%s:%d: job check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::_Exit(code);                                                    \
    }                                                                      \
  } while (0)

}  // namespace

// A job that forks while 4 threads allocate: the child has no recording (hooks, ranges and dumps do nothing to the
// parent's), may start its own, never deadlocks on a lock a vanished thread held, and never writes the parent's
// output at its exit; the parent goes on recording and its exit dump holds exactly its own events.
TEST(CaptureFork, ChildNeverTouchesTheParentsRecordingOrOutput) {
  if (kTsan) GTEST_SKIP() << "ThreadSanitizer does not support fork() with threads running";
  if (kAsan) GTEST_SKIP() << "this AddressSanitizer runtime's allocator is not fork-safe under running threads";
  const std::string out = tmp_path("fork_parent.pickle");
  const std::string child_out = tmp_path("fork_child.pickle");
  std::remove(out.c_str());
  constexpr int kThreads = 4, kPerThread = 2000, kForks = 20;
  const int status = run_job([&] {
    start_or_die(out, 1);
    std::vector<std::thread> ts;
    for (int t = 0; t < kThreads; ++t)
      ts.emplace_back([t] {
        for (int i = 0; i < kPerThread; ++i) {
          allocscope_capture_push("worker");
          session_test_alloc((uint64_t(t + 1) << 40) + uint64_t(i) * 4096, 4096);
          allocscope_capture_pop();
        }
      });
    for (int k = 0; k < kForks; ++k) {
      const pid_t c = fork();
      if (c == 0) {  // the forked child, with the parent's threads gone mid-call
        alarm(20);
        JOB_CHECK(allocscope_capture_active() == 0, 10);
        JOB_CHECK(Session::get().recorder() == nullptr, 11);
        allocscope_capture_push("child");  // no recording: nothing happens, nothing blocks
        allocscope_capture_pop();
        JOB_CHECK(allocscope_capture_dump(out.c_str()) == -1, 12);
        JOB_CHECK(std::string(allocscope_capture_last_error()).find("fork of process") != std::string::npos, 13);
        if (k % 2 == 0) {  // a child may record on its own, into its own file
          start_or_die(child_out + "." + std::to_string(getpid()), 0);
          session_test_alloc(0x1234000, 64);
          JOB_CHECK(allocscope_capture_dump(nullptr) == 0, 14);
          auto mine = load_snapshot_file(child_out + "." + std::to_string(getpid()));
          JOB_CHECK(mine.ok() && mine->events.size_rows() == 2, 15);
          std::remove((child_out + "." + std::to_string(getpid())).c_str());
          allocscope_capture_stop();
        }
        std::exit(0);  // atexit runs: the parent's dump at exit must not happen here
      }
      int st = 0;
      waitpid(c, &st, 0);
      JOB_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, 20 + (WIFEXITED(st) ? WEXITSTATUS(st) % 20 : 19));
      JOB_CHECK(!exists(out), 40);  // no child wrote the parent's output
    }
    for (auto& t : ts) t.join();
    session_test_alloc(0x9990000, 1 << 20);  // after the forks the parent still records
  });
  ASSERT_TRUE(WIFEXITED(status)) << "job killed by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  ASSERT_EQ(WEXITSTATUS(status), 0);
  auto s = load_snapshot_file(out);
  ASSERT_TRUE(s.ok()) << s.error().describe();
  EXPECT_EQ(s->events.size_rows(), 2u * (kThreads * kPerThread + 1));
  EXPECT_EQ(s->segments.size(), size_t(kThreads) * kPerThread + 1);
  EXPECT_EQ(leftover_temporaries(out), 0);
  std::remove(out.c_str());
}

// Under a launcher every rank shares one environment: %r names the rank (torchrun's RANK, mpirun's
// OMPI_COMM_WORLD_RANK, PMI, Slurm's SLURM_PROCID, LOCAL_RANK: first set wins). Only a launcher of several ranks (a
// world size above 1) gets "-rankN" in a name without %p or %r, and in the default name: Lightning sets LOCAL_RANK=0
// in a single process, and `-o lightning.pickle` wrote lightning-rank0.pickle.
TEST(CaptureOptions, RankInTheOutputName) {
  const char* vars[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID", "LOCAL_RANK",
                        "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS", "SLURM_NPROCS"};
  for (const char* v : vars) unsetenv(v);
  unsetenv("ALLOCSCOPE_OUTPUT");
  EXPECT_EQ(job_rank(), "");
  EXPECT_FALSE(several_ranks());
  EXPECT_EQ(options_from_env()->output_path, "allocscope-%p.pickle");
  EXPECT_EQ(expand_output_path("snap_%r.pickle"), "snap_0.pickle");  // no launcher: rank 0
  EXPECT_EQ(job_output_path("run.pickle"), "run.pickle");             // no launcher: the name as given
  // Lightning on one GPU: a rank, no world size.
  setenv("LOCAL_RANK", "0", 1);
  EXPECT_EQ(job_rank(), "0");
  EXPECT_EQ(job_output_path("lightning.pickle"), "lightning.pickle");
  EXPECT_EQ(options_from_env()->output_path, "allocscope-%p.pickle");
  setenv("WORLD_SIZE", "1", 1);  // torchrun --nproc_per_node=1: one rank, one name
  EXPECT_EQ(job_output_path("lightning.pickle"), "lightning.pickle");
  setenv("SLURM_PROCID", "12", 1);
  setenv("LOCAL_RANK", "3", 1);
  EXPECT_EQ(job_rank(), "12");  // the global rank wins over the node-local one
  setenv("RANK", "7", 1);
  EXPECT_EQ(job_rank(), "7");
  setenv("WORLD_SIZE", "16", 1);
  EXPECT_TRUE(several_ranks());
  EXPECT_EQ(options_from_env()->output_path, "allocscope-rank%r-%p.pickle");
  const std::string pid = std::to_string(getpid());
  EXPECT_EQ(expand_output_path("allocscope-rank%r-%p.pickle"), "allocscope-rank7-" + pid + ".pickle");
  EXPECT_EQ(expand_output_path("100%%-%r.pickle"), "100%-7.pickle");
  EXPECT_EQ(rank_from_name(expand_output_path("out/allocscope-rank%r-%p.pickle.gz")), 7);  // what `ranks` reads back
  // `record -o run.pickle.gz` under torchrun: every rank wrote, and merged PyTorch's file through, one name.
  EXPECT_EQ(job_output_path("out/run.pickle.gz"), "out/run-rank7.pickle.gz");
  EXPECT_EQ(job_output_path("run.pickle"), "run-rank7.pickle");
  EXPECT_EQ(job_output_path("run"), "run-rank7");
  EXPECT_EQ(job_output_path("run_%p.pickle"), "run_" + pid + ".pickle");  // the user made names distinct already
  EXPECT_EQ(rank_from_name(job_output_path("out/run.pickle.gz")), 7);
  unsetenv("WORLD_SIZE");
  setenv("SLURM_NTASKS", "4", 1);  // srun's count says several too
  EXPECT_EQ(job_output_path("run.pickle"), "run-rank7.pickle");
  setenv("SLURM_NTASKS", "many", 1);  // not a number: no sign of several
  EXPECT_EQ(job_output_path("run.pickle"), "run.pickle");
  setenv("RANK", "x; rm -rf", 1);  // not a number: ignored, the next variable answers
  EXPECT_EQ(job_rank(), "12");
  for (const char* v : vars) unsetenv(v);
}

// A process that never allocated device memory (a launcher) writes nothing at exit, and says so.
TEST(CaptureExit, NoAllocationWritesNothing) {
  const std::string out = tmp_path("no_allocation.pickle");
  const std::string err = tmp_path("no_allocation.stderr");
  std::remove(out.c_str());
  const int status = run_job([&] {
    std::FILE* f = std::freopen(err.c_str(), "w", stderr);
    if (!f) std::_Exit(91);
    start_or_die(out, 1);
    std::exit(0);
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  struct stat st;
  EXPECT_NE(stat(out.c_str(), &st), 0) << "a file was written for a process without allocations";
  EXPECT_NE(read_text(err).find("made no CUDA allocation; nothing written"), std::string::npos) << read_text(err);
  std::remove(err.c_str());
}

// An output path that cannot be written: one line on stderr naming it and why (however many automatic dumps fail
// the same way), the job goes on and its exit status is its own.
TEST(CaptureExit, UnwritableOutputIsReportedOnceAndTheExitStatusIsKept) {
  const std::string err = tmp_path("unwritable.stderr");
  const int status = run_job([&] {
    std::FILE* f = std::freopen(err.c_str(), "w", stderr);
    if (!f) std::_Exit(91);
    start_or_die("/nonexistent-dir/out.pickle", 1);
    session_test_alloc(0x1000, 4096);
    Recorder* r = Session::get().recorder();
    for (int i = 0; i < 3; ++i) {  // three OOMs, each dumping (dump_on_oom)
      Site s;
      r->on_oom(s, 1ull << 40, 0, 0);
      Session::get().after_oom();
    }
    session_test_alloc(0x2000, 4096);  // recording goes on
    JOB_CHECK(Session::get().recorder()->recorded() == 7, 30);
    std::exit(7);
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 7);
  const std::string text = read_text(err);
  EXPECT_EQ(count_of(text, "failed"), 1) << text;
  EXPECT_NE(text.find("/nonexistent-dir/out.pickle"), std::string::npos) << text;
  EXPECT_NE(text.find("No such file or directory"), std::string::npos) << text;
  EXPECT_NE(text.find("the job goes on"), std::string::npos) << text;
  std::remove(err.c_str());
}

// Everything recorded before a clean exit (from any thread) is in the dump at exit, and everything recorded before
// the dump signal is in the signal's dump; allocations still live at exit are the `segments`; no temporary remains.
TEST(CaptureExit, NoRecordedEventIsLostAtExitOrOnTheDumpSignal) {
  if (kTsan) GTEST_SKIP() << "ThreadSanitizer does not support fork() with threads running";
  const std::string out = tmp_path("exit_all.pickle.gz");
  const std::string sig_out = tmp_path("exit_signal.pickle");
  const RemoveAtEnd cleanup{{out, sig_out}};
  std::remove(out.c_str());
  constexpr int kThreads = 6, kPerThread = 3000;
  const int status = run_job([&] {
    start_or_die(out, 1, SIGUSR2);
    std::vector<std::thread> ts;
    for (int t = 0; t < kThreads; ++t)
      ts.emplace_back([t] {
        Recorder* r = Session::get().recorder();
        for (int i = 0; i < kPerThread; ++i) {
          const uint64_t addr = (uint64_t(t + 1) << 40) + uint64_t(i) * 4096;
          session_test_alloc(addr, 4096);
          if (i % 2) {
            Site s;
            r->on_free(s, addr, 0, false, 0);
          }
        }
      });
    for (auto& t : ts) t.join();
    // The helper thread dumps to the configured path; move that file aside so the exit dump can be told apart.
    JOB_CHECK(raise(SIGUSR2) == 0, 31);
    for (int i = 0; i < 2000 && !exists(out); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    JOB_CHECK(exists(out), 32);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    JOB_CHECK(std::rename(out.c_str(), sig_out.c_str()) == 0, 33);
    session_test_alloc(0x7770000, 1 << 20);  // one more, live at exit
  });
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  const uint64_t before_signal = uint64_t(kThreads) * kPerThread * 2 + uint64_t(kThreads) * (kPerThread / 2) * 2;
  auto sig = load_snapshot_file(sig_out);
  ASSERT_TRUE(sig.ok()) << sig.error().describe();
  EXPECT_EQ(sig->events.size_rows(), before_signal);
  EXPECT_EQ(sig->segments.size(), size_t(kThreads) * kPerThread / 2);
  auto s = load_snapshot_file(out);
  ASSERT_TRUE(s.ok()) << s.error().describe();
  EXPECT_EQ(s->events.size_rows(), before_signal + 2);
  ASSERT_EQ(s->segments.size(), size_t(kThreads) * kPerThread / 2 + 1);
  // The trace replayed forward leaves exactly the `segments` alive.
  std::set<uint64_t> live;
  for (size_t i = 0; i < s->events.size_rows(); ++i) {
    if (s->events.action[i] == Action::kSegmentAlloc) live.insert(s->events.addr[i]);
    if (s->events.action[i] == Action::kSegmentFree) live.erase(s->events.addr[i]);
  }
  std::set<uint64_t> segs;
  for (const Segment& g : s->segments) segs.insert(g.address);
  EXPECT_EQ(live, segs);
  EXPECT_EQ(leftover_temporaries(out), 0);
  std::remove(out.c_str());
  std::remove(sig_out.c_str());
}

// Two processes of one job dumping to one path at the same time (no %p): each dump goes to its own temporary and is
// renamed whole, so the path always holds one complete snapshot, never a mix or a truncated file.
TEST(CaptureOutput, ConcurrentDumpsToOnePathNeverMix) {
  const std::string out = tmp_path("shared.pickle");
  std::remove(out.c_str());
  std::vector<pid_t> kids;
  for (int k = 0; k < 2; ++k) {
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
      alarm(60);
      start_or_die(out, 0, 0, ALLOCSCOPE_STACKS_NONE);
      for (int i = 0; i < 2000 * (k + 1); ++i) session_test_alloc(0x100000 + uint64_t(i) * 4096, 4096);
      for (int i = 0; i < 40; ++i) JOB_CHECK(allocscope_capture_dump(nullptr) == 0, 50);
      std::_Exit(0);
    }
    kids.push_back(pid);
  }
  int loads = 0;
  size_t reaped = 0;
  while (reaped < kids.size()) {
    for (pid_t& p : kids) {
      int st = 0;
      if (p > 0 && waitpid(p, &st, WNOHANG) == p) {
        p = -1;
        ++reaped;
        // Every one of its dumps succeeded (a shared temporary makes the second rename fail: a lost dump).
        EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "dumping process ended with status " << st;
      }
    }
    if (!exists(out)) continue;
    auto s = load_snapshot_file(out);
    ASSERT_TRUE(s.ok()) << s.error().describe();
    EXPECT_TRUE(s->events.size_rows() == 4000u || s->events.size_rows() == 8000u) << s->events.size_rows();
    ++loads;
  }
  EXPECT_GT(loads, 0);
  EXPECT_EQ(leftover_temporaries(out), 0);
  std::remove(out.c_str());
}

// A fork from inside start() itself (cuptiSubscribe initialising the driver may run nvidia-modprobe) must not wait on
// the start/stop lock its own thread holds.
TEST(CaptureFork, ForkInsideStartDoesNotDeadlock) {
  static const Backend forking_backend{
      [] {
        const pid_t c = fork();
        if (c == 0) std::_Exit(0);
        int st = 0;
        waitpid(c, &st, 0);
        return Status{};
      },
      [] {}, [] { return int16_t{0}; }};
  const int status = run_job([] {
    start_or_die(tmp_path("fork_in_start.pickle"), 0);  // the first start registers the fork handlers
    JOB_CHECK(allocscope_capture_stop() == 0, 59);
    set_backend(&forking_backend);
    start_or_die(tmp_path("fork_in_start.pickle"), 0);
    JOB_CHECK(allocscope_capture_active() == 1, 60);
    JOB_CHECK(allocscope_capture_stop() == 0, 61);
  }, 20);
  ASSERT_TRUE(WIFEXITED(status)) << "job killed by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}
