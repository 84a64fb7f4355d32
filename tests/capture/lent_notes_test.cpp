// What the capture adds for the answers on the CPU: the loans of frames kept as time windows and carried through a
// merge (allocscope_capture_dump_merged) to PyTorch's own frameless entries, and the notes of what it did not see.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "allocscope/frame_filter.h"
#include "allocscope/loader.h"
#include "allocscope/writer.h"
#include "allocscope_capture.h"
#include "notes.h"
#include "session.h"
#include "../cli/synthetic.h"

using namespace allocscope;
using namespace allocscope::capture;

namespace {

std::string tmp_path(const std::string& name) {
  const char* d = std::getenv("TMPDIR");
  return std::string(d && *d ? d : "/tmp") + "/allocscope_lent_" + std::to_string(getpid()) + "_" + name;
}

// Stands for the Python line that called backward(): a loan's frames are return addresses or Python frames alike.
volatile int g_sink = 0;
__attribute__((noinline)) void lent_notes_backward_line() {
  g_sink = g_sink + 1;
  g_sink = g_sink * 3;
}

bool warns(const Snapshot& s, const std::string& what) {
  for (const std::string& w : s.warnings)
    if (w.find(what) != std::string::npos) return true;
  return false;
}

std::string names(const Snapshot& s, StackId st) {
  std::string o;
  for (FrameId f : s.stack(st)) o += std::string(s.str(s.frames[f].name)) + "|";
  return o;
}

}  // namespace

// A PyTorch job as the bootstrap runs it: PyTorch's pool holds a segment (both recorders see it), backward() lends
// the waiting line while PyTorch's engine allocates a frameless block, then the merge. PyTorch's part of the merged
// file is PyTorch's own; loaded, its frameless block has the loan's frames.
TEST(CaptureLent, AMergedFileCarriesTheLoansToPyTorchsFramelessEntries) {
  const std::string out = tmp_path("merged.pickle");
  const std::string torch = tmp_path("torch.pickle");
  allocscope_capture_options o;
  allocscope_capture_default_options(&o);
  o.output_path = out.c_str();
  o.dump_at_exit = 0;
  o.stacks = ALLOCSCOPE_STACKS_NATIVE;
  ASSERT_EQ(allocscope_capture_start(&o), 0) << allocscope_capture_last_error();
  Recorder* r = Session::get().recorder();
  ASSERT_NE(r, nullptr);
  Site site;
  site.api = Api::kMemAlloc;
  r->on_alloc(site, 0xA000000, 2 << 20, SegmentKind::kPlain, 0);
  const int64_t segment_time = now_us();
  const uintptr_t line = reinterpret_cast<uintptr_t>(&lent_notes_backward_line) + 1;
  r->on_lend_begin(3, "backward", &line, 1);
  usleep(2000);
  const int64_t engine_time = now_us();
  usleep(2000);
  r->on_lend_end(3);
  r->on_lend_end(3);  // a second end of one token changes nothing

  clitest::SnapshotBuilder b;
  const StackId forward = b.stack({{"forward", "/home/u/train.py", 12}});
  b.segment(0xA000000, 0, 512, {{512, 512, BlockState::kActiveAllocated, 0}, {(2 << 20) - 512, 0, BlockState::kInactive, 0}});
  b.device();
  b.event(Action::kSegmentAlloc, 0xA000000, 2 << 20, forward);
  b.event(Action::kAlloc, 0xA000000, 512);  // the engine's: no frames
  b.s.events.time_us = {segment_time, engine_time};
  ASSERT_TRUE(write_snapshot_file(b.s, torch).ok());
  ASSERT_EQ(allocscope_capture_dump_merged(torch.c_str(), 0), 0) << allocscope_capture_last_error();
  auto merged = load_snapshot_file(out);
  ASSERT_TRUE(merged.ok()) << merged.error().describe();
  const Snapshot& s = *merged;
  ASSERT_TRUE(s.outside);
  ASSERT_EQ(s.outside->lent_windows.size(), 1u);
  const LentWindow& w = s.outside->lent_windows[0];
  EXPECT_EQ(s.str(w.kind), "backward");
  EXPECT_LT(w.start_us, engine_time);
  EXPECT_GT(w.end_us, engine_time);
  EXPECT_NE(names(s, w.stack).find("lent_notes_backward_line"), std::string::npos) << names(s, w.stack);
  // PyTorch's frameless alloc and its block got the loan's frames; the framed segment_alloc kept its own.
  EXPECT_EQ(s.events.stack[1], w.stack);
  EXPECT_EQ(s.unlent(s.events.stack[1]), 0u);
  EXPECT_EQ(s.blocks[0].stack, w.stack);
  EXPECT_EQ(names(s, s.events.stack[0]), "forward|");
  // The merge said PyTorch's part is there: no warning that it is missing.
  EXPECT_FALSE(warns(s, "no PyTorch tensors")) << (s.warnings.empty() ? "" : s.warnings[0]);
  EXPECT_EQ(allocscope_capture_stop(), 0);
  std::remove(out.c_str());
  std::remove(torch.c_str());
}

// The ring keeps the newest windows; an open one ends at the dump, a loan that ended after the ring moved past it
// changes nothing.
TEST(CaptureLent, TheWindowRingKeepsTheNewestAndEndsOpenOnesAtTheDump) {
  Options opt;
  opt.max_entries = 1000;  // a ring of 1024 windows
  opt.stacks = StackMode::kNone;
  Recorder r(opt);
  const uintptr_t line = reinterpret_cast<uintptr_t>(&lent_notes_backward_line) + 1;
  r.on_lend_begin(1, "backward", &line, 1);  // stays open while 1100 more pass through the ring
  for (int k = 0; k < 1100; ++k) {
    r.on_lend_begin(2, "all_reduce", &line, 1);
    r.on_lend_end(2);
  }
  r.on_lend_end(1);  // its slot holds another window now
  r.on_lend_begin(4, "backward", &line, 1);
  r.on_lend_begin(9, "backward", &line, 1);  // no such token: ignored
  r.on_lend_begin(5, "backward", &line, 0);  // no frames: ignored
  const Frozen f = r.freeze();
  ASSERT_EQ(f.windows.size(), 1024u);
  for (size_t k = 1; k < f.windows.size(); ++k) {
    EXPECT_LT(f.windows[k - 1].serial, f.windows[k].serial);
    EXPECT_LE(f.windows[k].start_us, f.windows[k].end_us);
  }
  EXPECT_EQ(f.windows.back().serial, 1102u);  // the open one, ended at the freeze
  EXPECT_EQ(f.strings[f.windows.back().kind], "backward");
}

// Notes from the bootstrap, and what the environment `record` set says of PyTorch's recorder, become the file's
// notes, and the loader turns them into warnings `summary` prints.
TEST(CaptureLent, NotesSayWhatTheCaptureDidNotSee) {
  Snapshot s;
  Setting cap;
  cap.key = "allocscope_capture";
  cap.kind = Setting::Kind::kDict;
  Setting mods;
  mods.key = "modules";
  mods.kind = Setting::Kind::kList;
  Setting m;
  m.kind = Setting::Kind::kStr;
  m.s = "/venv/site-packages/torch/lib/libc10_cuda.so 0x7f0000000000-0x7f0000100000";
  mods.children.push_back(m);
  cap.children.push_back(mods);
  s.allocator_settings.push_back(cap);
  auto torch_note = [&](const Notes& notes, bool merged) {
    Snapshot copy = s;
    add_notes(&copy, notes, merged);
    for (const Setting& c : copy.allocator_settings[0].children)
      if (c.key == "notes")
        for (const Setting& n : c.children)
          if (n.key == "torch_recorder") return n.s;
    return std::string("(none)");
  };
  unsetenv("ALLOCSCOPE_TORCH");
  unsetenv("ALLOCSCOPE_TORCH_RECORDER");
  setenv("ALLOCSCOPE_TORCH_OFF", "allocscope record found no Python bootstrap", 1);
  EXPECT_EQ(torch_note({}, false), "off: allocscope record found no Python bootstrap");
  EXPECT_EQ(torch_note({{"torch_recorder", "not started: RuntimeError('x')"}}, false), "not started: RuntimeError('x')");
  EXPECT_EQ(torch_note({{"torch_recorder", "not started: RuntimeError('x')"}}, true), "merged");
  unsetenv("ALLOCSCOPE_TORCH_OFF");
  setenv("ALLOCSCOPE_TORCH_RECORDER", "0", 1);
  EXPECT_EQ(torch_note({}, false), "off: ALLOCSCOPE_TORCH_RECORDER=0 was set");
  unsetenv("ALLOCSCOPE_TORCH_RECORDER");
  setenv("ALLOCSCOPE_TORCH", "1", 1);
  EXPECT_EQ(torch_note({}, false).rfind("on, but not in this file", 0), 0u);
  unsetenv("ALLOCSCOPE_TORCH");
  EXPECT_EQ(torch_note({}, false).rfind("off: no Python bootstrap ran", 0), 0u);
  // A process that never loaded PyTorch's CUDA library is not a PyTorch job: nothing to say of its recorder.
  s.allocator_settings[0].children.clear();
  EXPECT_EQ(torch_note({}, false), "(none)");

  // Through a real dump: the bootstrap's notes reach the file, and the loader warns.
  const std::string out = tmp_path("notes.pickle");
  allocscope_capture_options o;
  allocscope_capture_default_options(&o);
  o.output_path = out.c_str();
  o.dump_at_exit = 0;
  ASSERT_EQ(allocscope_capture_start(&o), 0) << allocscope_capture_last_error();
  allocscope_capture_note("torch_recorder", "not started: RuntimeError('no CUDA')");
  allocscope_capture_note("gradients", "no Python line (backward() not wrapped)");
  allocscope_capture_note("gradients", "");  // withdrawn
  allocscope_capture_note("nccl", "native frames only");
  ASSERT_EQ(allocscope_capture_dump(nullptr), 0) << allocscope_capture_last_error();
  allocscope_capture_note("torch_recorder", "");
  allocscope_capture_note("nccl", "");
  auto loaded = load_snapshot_file(out);
  ASSERT_TRUE(loaded.ok()) << loaded.error().describe();
  EXPECT_TRUE(warns(*loaded, "no PyTorch tensors in this capture (PyTorch's own recorder: not started: "
                             "RuntimeError('no CUDA')): it shows the memory PyTorch's caching allocator reserved"));
  EXPECT_TRUE(warns(*loaded, "the capture says: nccl: native frames only"));
  EXPECT_FALSE(warns(*loaded, "gradients"));
  EXPECT_EQ(allocscope_capture_stop(), 0);
  std::remove(out.c_str());
}
