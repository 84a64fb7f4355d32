// The C ABI and session on the CPU (no CUDA backend linked): start/dump/stop, ranges, options from the environment,
// and a dump requested by a signal, which a helper thread performs outside the handler.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <string>
#include <thread>

#include "allocscope/loader.h"
#include "allocscope_capture.h"
#include "allocscope_capture.hpp"
#include "options.h"
#include "session.h"

using namespace allocscope;
using namespace allocscope::capture;

namespace {

std::string tmp_path(const std::string& name) {
  const char* d = std::getenv("TMPDIR");
  return std::string(d && *d ? d : "/tmp") + "/allocscope_session_" + std::to_string(getpid()) + "_" + name;
}

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
  setenv("ALLOCSCOPE_STACKS", "python", 1);
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
