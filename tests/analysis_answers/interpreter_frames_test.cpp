// The interpreter's own C frames (is_interpreter_frame): never a site, never printed in a stack ("??:0:PyRun_
// StringFlags" ended an audit's leak stacks twice), by the one frame filter every answer uses.
#include <gtest/gtest.h>

#include <string>

#include "allocscope/categories.h"
#include "allocscope/frame_filter.h"
#include "allocscope/iterations.h"
#include "allocscope/leaks.h"
#include "allocscope/lifetimes.h"
#include "../cli/synthetic.h"

namespace allocscope::test {
namespace {

TEST(InterpreterFrames, CPythonsFunctionsWithoutASourceOrInTheInterpreterAreTheInterpreters) {
  for (const char* file : {"??", "", "/usr/bin/python3.12", "/opt/py/lib/libpython3.11.so.1.0", "python3.13t"}) {
    EXPECT_TRUE(is_interpreter_frame("PyRun_StringFlags", file)) << file;
    EXPECT_TRUE(is_interpreter_frame("_PyEval_EvalFrameDefault", file)) << file;
    EXPECT_TRUE(is_interpreter_frame("Py_RunMain", file)) << file;
    EXPECT_TRUE(is_interpreter_frame("pymain_run_python", file)) << file;
  }
  // Not CPython's names, or in a file of their own: the job's or a library's code.
  EXPECT_FALSE(is_interpreter_frame("Pyramid::build", "??"));
  EXPECT_FALSE(is_interpreter_frame("main", "??"));
  EXPECT_FALSE(is_interpreter_frame("my_kernel_launch", ""));
  EXPECT_FALSE(is_interpreter_frame("PyInit_myext", "/home/u/myext.cpython-312-x86_64-linux-gnu.so"));
  EXPECT_FALSE(is_interpreter_frame("PyRun_StringFlags", "/home/u/pythonic_tools.py"));
  EXPECT_FALSE(is_interpreter_frame("forward", "/home/u/train.py"));
}

// A capture's leak whose stacks run through the interpreter (python -c, PyRun_StringFlags): its site is the user's
// line, and the printed stacks never show a "??:0" frame.
TEST(InterpreterFrames, LeakStacksAndSitesNeverShowThem) {
  clitest::SnapshotBuilder b;
  const StackId leak = b.stack({{"cudaMalloc", "/usr/local/cuda/lib64/libcudart.so.13", 0},
                                {"keep", "/home/u/job.py", 7},
                                {"PyRun_StringFlags", "??", 0},
                                {"PyRun_StringFlags", "??", 0},
                                {"Py_RunMain", "??", 0},
                                {"main", "/usr/bin/python3.12", 0}});
  const StackId native_only = b.stack({{"PyRun_StringFlags", "??", 0}, {"cudaMalloc", "libcudart.so.13", 0},
                                       {"Py_BytesMain", "??", 0}});
  b.device();
  for (int step = 0; step < 8; ++step) {
    b.annotate("Optimizer.step#SGD.step");
    b.event(Action::kAlloc, 0x1000 * (step + 1), 1 << 20, leak);  // kept: one more per step
    b.event(Action::kAlloc, 0x100000 * (step + 1), 4096, native_only);
    b.event(Action::kFreeCompleted, 0x100000 * (step + 1), 4096, native_only);
  }
  const Snapshot& s = b.s;
  const FrameFilter ff(s);
  EXPECT_EQ(FrameFilter::format(s, ff.site(leak)), "job.py:7:keep");
  EXPECT_NE(FrameFilter::site_text(s, ff.site(native_only)).substr(0, 2), "??");
  for (StackId st : {leak, native_only}) {
    for (FrameId f : ff.shown_frames(s, st)) EXPECT_EQ(FrameFilter::format(s, f).find("??"), std::string::npos);
    for (FrameId f : ff.frames_from_site(s, st)) EXPECT_EQ(FrameFilter::format(s, f).find("??"), std::string::npos);
  }
  const Lifetimes lts = build_lifetimes(s);
  const DeviceLifetimes& lt = lts.devices[0];
  const Iterations it = detect_iterations(s, lt);
  auto c = categorize(s, lt, it, ff);
  ASSERT_TRUE(c.ok());
  const LeakReport r = find_leaks(s, lt, it, c.value(), ff);
  ASSERT_TRUE(r.leak_suspected());
  const std::string text = to_text(s, r);
  EXPECT_NE(text.find("job.py:7:keep"), std::string::npos) << text;
  EXPECT_EQ(text.find("??"), std::string::npos) << text;
  EXPECT_EQ(text.find("PyRun_StringFlags"), std::string::npos) << text;
}

}  // namespace
}  // namespace allocscope::test
