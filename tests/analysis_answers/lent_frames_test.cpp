// The lent windows (lent_frames.h): PyTorch's frameless entries made while a backward() ran get its line, by the one
// rule, on a real merged file of a GPU job and on crafted files; a window list from a hostile file never stops a load.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "allocscope/categories.h"
#include "allocscope/frame_filter.h"
#include "allocscope/iterations.h"
#include "allocscope/leaks.h"
#include "allocscope/lent_frames.h"
#include "allocscope/lifetimes.h"
#include "allocscope/loader.h"
#include "allocscope/pickle.h"
#include "allocscope/writer.h"
#include "answers_fixtures.h"
#include "../cli/synthetic.h"

namespace allocscope::test {
namespace {

constexpr int64_t kSecond = 1'000'000;

// A trace of `n` entries one second apart (t = k seconds), on one device: frameless allocs unless `framed` says.
struct Trace {
  clitest::SnapshotBuilder b;
  StackId py = 0;  // a Python stack of the job's own (the forward's line)
  Trace() {
    py = b.stack({{"forward", "/home/u/train.py", 12}});
    b.device();
  }
  uint32_t at(int64_t seconds, Action a = Action::kAlloc, uint64_t addr = 0, StackId stack = 0) {
    b.event(a, addr ? addr : 0x1000 * (b.s.events.size_rows() + 1), 512, stack);
    b.s.events.time_us.back() = seconds * kSecond;
    return static_cast<uint32_t>(b.s.events.size_rows() - 1);
  }
  LentWindow window(int64_t from_us, int64_t to_us, int64_t line) {
    return {from_us, to_us, b.s.strings.intern("backward"), b.stack({{"backward", "/venv/site-packages/torch/_tensor.py", 631},
                                                                      {"train_step", "/home/u/train.py", line}})};
  }
  std::string site(uint32_t row) {
    const FrameFilter ff(b.s);
    return FrameFilter::format(b.s, ff.site(b.s.events.stack[row]));
  }
};

TEST(LentFrames, TheNewestWindowHoldingAFramelessEntryLendsItsFrames) {
  Trace t;
  const uint32_t before = t.at(1), outer = t.at(3), framed = t.at(4, Action::kAlloc, 0, t.py), inner = t.at(5),
                 outer_again = t.at(7), tie = t.at(9), huge_only = t.at(20), edge_in = t.at(30), edge_out = t.at(40);
  std::vector<LentWindow> w = {
      t.window(2 * kSecond, 8 * kSecond, 20),                                  // the outer backward()
      t.window(INT64_MIN, INT64_MAX, 99),                                     // a crafted file's "all time"
      t.window(5 * kSecond, 6 * kSecond, 30),                                 // nested in the outer: newer, lends
      t.window(9 * kSecond, 9 * kSecond, 40), t.window(9 * kSecond, 10 * kSecond, 41),  // equal starts: the later
      t.window(10 * kSecond, 2 * kSecond, 50),                                // ends before it starts: ignored
      t.window(29 * kSecond, 30 * kSecond - kLentSlackUs, 60),               // the slack reaches the entry
      t.window(39 * kSecond, 40 * kSecond - kLentSlackUs - 1, 70),           // one microsecond more does not
      {31 * kSecond, 45 * kSecond, 0, 0},                                     // no frames: ignored
      {31 * kSecond, 45 * kSecond, 0, 12345},                                 // a stack not in the file: ignored
  };
  const LentCount n = lend_window_frames(&t.b.s, w);
  EXPECT_EQ(t.site(outer), "train.py:20:train_step");
  EXPECT_EQ(t.site(inner), "train.py:30:train_step");
  EXPECT_EQ(t.site(outer_again), "train.py:20:train_step");
  EXPECT_EQ(t.site(tie), "train.py:41:train_step");
  EXPECT_EQ(t.site(edge_in), "train.py:60:train_step");
  // Where only the crafted window holds an entry, it lends: the file says so.
  EXPECT_EQ(t.site(before), "train.py:99:train_step");
  EXPECT_EQ(t.site(huge_only), "train.py:99:train_step");
  EXPECT_EQ(t.site(edge_out), "train.py:99:train_step");
  // An entry with Python frames keeps its own.
  EXPECT_EQ(t.b.s.events.stack[framed], t.py);
  EXPECT_EQ(n.rows, 8u);
  // Each lent stack remembers the one it replaced: no frames at all here.
  for (uint32_t row : {before, outer, inner, outer_again, tie, huge_only, edge_in, edge_out}) {
    EXPECT_NE(t.b.s.events.stack[row], 0u);
    EXPECT_EQ(t.b.s.unlent(t.b.s.events.stack[row]), 0u);
    EXPECT_TRUE(has_python_frame(t.b.s, t.b.s.events.stack[row]));
  }
  EXPECT_EQ(t.b.s.unlent(t.py), t.py);
}

TEST(LentFrames, BlocksAndSegmentsGetWhatTheirAllocationGot) {
  Trace t;
  const StackId cpp = t.b.stack({{"c10::cuda::CUDACachingAllocator::malloc", "", 0}});  // C++ frames, no Python
  t.at(2, Action::kSegmentAlloc, 0xA000, cpp);
  t.at(2, Action::kAlloc, 0xA000, cpp);
  t.at(2, Action::kAlloc, 0xB000, cpp);
  t.at(3, Action::kFreeCompleted, 0xB000, cpp);  // freed after: its block now is another allocation's
  t.at(9, Action::kAlloc, 0xC000, cpp);           // outside the window
  t.b.segment(0xA000, 0, 1536, {{512, 512, BlockState::kActiveAllocated, cpp},
                               {512, 512, BlockState::kActiveAllocated, cpp},
                               {512, 512, BlockState::kInactive, cpp}});
  t.b.s.blocks[1].address = 0xB000;
  t.b.s.blocks[2].address = 0xC000;
  t.b.s.segments[0].stack = cpp;
  const LentCount n = lend_window_frames(&t.b.s, std::vector<LentWindow>{t.window(kSecond, 4 * kSecond, 20)});
  EXPECT_EQ(n.rows, 4u);
  EXPECT_EQ(n.blocks, 1u);
  EXPECT_EQ(n.segments, 1u);
  const Snapshot& s = t.b.s;
  EXPECT_EQ(s.blocks[0].stack, s.events.stack[1]);
  EXPECT_EQ(s.segments[0].stack, s.events.stack[0]);
  EXPECT_EQ(s.blocks[1].stack, cpp);
  EXPECT_EQ(s.blocks[2].stack, cpp);
  // The C++ frames stay, innermost, with the lent Python frames outer to them, as the capture places them; the
  // entry's own stack is what categories read.
  ASSERT_EQ(s.stack(s.events.stack[1]).size(), 3u);
  EXPECT_EQ(s.stack(s.events.stack[1])[0], s.stack(cpp)[0]);
  EXPECT_EQ(s.unlent(s.events.stack[1]), cpp);
}

TEST(LentFrames, ATraceWithoutTimesIsLeftAlone) {
  Trace t;
  const uint32_t row = t.at(0);
  EXPECT_EQ(lend_window_frames(&t.b.s, std::vector<LentWindow>{t.window(-kSecond, kSecond, 20)}).rows, 0u);
  EXPECT_EQ(t.b.s.events.stack[row], 0u);
}

// The windows written by our writer (as the capture writes them) come back at load and are applied there, at the top
// level of a file and inside a merged file's capture part.
TEST(LentFrames, WindowsWrittenAreAppliedWhenTheFileLoads) {
  Trace t;
  const uint32_t row = t.at(3);
  t.b.s.lent_windows.push_back(t.window(2 * kSecond, 4 * kSecond, 20));
  auto loaded = load_snapshot(write_snapshot(t.b.s));
  ASSERT_TRUE(loaded.ok()) << loaded.error().describe();
  ASSERT_EQ(loaded->lent_windows.size(), 1u);
  EXPECT_EQ(loaded->str(loaded->lent_windows[0].kind), "backward");
  EXPECT_EQ(loaded->lent_windows[0].start_us, 2 * kSecond);
  EXPECT_EQ(FrameFilter::format(*loaded, FrameFilter(*loaded).site(loaded->events.stack[row])),
            "train.py:20:train_step");
  EXPECT_TRUE(loaded->unknown_keys.empty());
  EXPECT_TRUE(loaded->warnings.empty());
}

// A pickle of a PyTorch-shaped snapshot (one frameless alloc at t = 3 s) whose 'allocscope_lent' is written by `lent`.
template <class F>
Result<Snapshot> with_lent(F lent) {
  pickle::Writer w;
  w.begin_dict();
  w.key("segments"), w.begin_list(), w.end_list();
  w.key("device_traces"), w.begin_list(), w.begin_list();
  w.begin_dict();
  w.key("action"), w.str("alloc");
  w.key("addr"), w.uinteger(0x1000);
  w.key("size"), w.uinteger(512);
  w.key("stream"), w.integer(0);
  w.key("time_us"), w.integer(3 * kSecond);
  w.key("frames"), w.begin_list(), w.end_list();
  w.end_dict();
  w.end_list(), w.end_list();
  w.key("allocscope_lent");
  lent(w);
  w.end_dict();
  return load_snapshot(w.finish());
}

void frame(pickle::Writer& w, int64_t line) {
  w.begin_dict();
  w.key("name"), w.str("train_step");
  w.key("filename"), w.str("/home/u/train.py");
  w.key("line"), w.integer(line);
  w.end_dict();
}

// One window dict; `skip` leaves a key out, `odd` writes that key as a str.
void window(pickle::Writer& w, int64_t start, int64_t end, const std::string& skip = "", const std::string& odd = "") {
  w.begin_dict();
  auto field = [&](const char* key, auto write) {
    if (skip == key) return;
    w.key(key);
    if (odd == key) w.str("17");
    else write();
  };
  field("kind", [&] { w.str("backward"); });
  field("start_us", [&] { w.integer(start); });
  field("end_us", [&] { w.integer(end); });
  field("stack", [&] { w.begin_list(), frame(w, 20), w.end_list(); });
  w.key("a_later_writers_key"), w.str("ignored");
  w.end_dict();
}

std::string site_of_row0(const Snapshot& s) {
  return s.events.size_rows() ? FrameFilter::format(s, FrameFilter(s).site(s.events.stack[0])) : "(no rows)";
}

bool warns(const Snapshot& s, const std::string& what) {
  return std::any_of(s.warnings.begin(), s.warnings.end(),
                     [&](const std::string& w) { return w.find(what) != std::string::npos; });
}

TEST(LentFrames, HostileWindowListsAreLeftOutAndNeverStopALoad) {
  // Not a list.
  auto not_list = with_lent([](pickle::Writer& w) { w.integer(7); });
  ASSERT_TRUE(not_list.ok()) << not_list.error().describe();
  EXPECT_TRUE(warns(*not_list, "'allocscope_lent' is a int"));
  EXPECT_EQ(site_of_row0(*not_list), "<no frames>");
  // Every way a window can be wrong, beside one good window that still lends.
  auto mixed = with_lent([](pickle::Writer& w) {
    w.begin_list();
    w.integer(1);                                     // not a dict
    window(w, 2 * kSecond, 4 * kSecond, "end_us");    // a key missing
    window(w, 2 * kSecond, 4 * kSecond, "stack");
    window(w, 2 * kSecond, 4 * kSecond, "", "start_us");  // a str where an int goes
    window(w, 2 * kSecond, 4 * kSecond, "", "stack");     // a str where the frames go
    window(w, 4 * kSecond, 2 * kSecond);              // ends before it starts
    w.begin_dict();                                   // a stack holding a non-frame
    w.key("start_us"), w.integer(2 * kSecond);
    w.key("end_us"), w.integer(4 * kSecond);
    w.key("stack"), w.begin_list(), frame(w, 30), w.integer(5), w.end_list();
    w.end_dict();
    w.begin_dict();                                   // an empty stack
    w.key("start_us"), w.integer(2 * kSecond);
    w.key("end_us"), w.integer(4 * kSecond);
    w.key("stack"), w.begin_list(), w.end_list();
    w.end_dict();
    window(w, 2 * kSecond, 4 * kSecond);              // the good one (no kind is fine too)
    w.end_list();
  });
  ASSERT_TRUE(mixed.ok()) << mixed.error().describe();
  EXPECT_EQ(mixed->lent_windows.size(), 1u);
  EXPECT_TRUE(warns(*mixed, "8 lent window(s) in 'allocscope_lent' were left out")) << mixed->warnings.size();
  EXPECT_EQ(site_of_row0(*mixed), "train.py:20:train_step");
  // A file with 'frames' keys in a window instead (not our key) is read as it always was: not a window.
  auto unkeyed = with_lent([](pickle::Writer& w) {
    w.begin_list();
    w.begin_dict();
    w.key("frames"), w.begin_list(), frame(w, 20), w.end_list();
    w.end_dict();
    w.end_list();
  });
  ASSERT_TRUE(unkeyed.ok()) << unkeyed.error().describe();
  EXPECT_TRUE(unkeyed->lent_windows.empty());
  EXPECT_EQ(site_of_row0(*unkeyed), "<no frames>");
  // Many overlapping windows, unsorted: linear-ish work, and the newest (latest start) holding the entry lends.
  auto many = with_lent([](pickle::Writer& w) {
    w.begin_list();
    for (int k = 0; k < 20000; ++k) window(w, (k % 2 ? 1 : -1) * int64_t{k} * 100, 100 * kSecond);
    w.begin_dict();
    w.key("start_us"), w.integer(3 * kSecond - 1);
    w.key("end_us"), w.integer(INT64_MAX);
    w.key("stack"), w.begin_list(), frame(w, 77), w.end_list();
    w.end_dict();
    w.end_list();
  });
  ASSERT_TRUE(many.ok()) << many.error().describe();
  EXPECT_EQ(many->lent_windows.size(), 20001u);
  EXPECT_EQ(site_of_row0(*many), "train.py:77:train_step");
}

// A real merged file of a GPU job (owners/torch_job.py, 6 steps) with windows where its backward() calls ran: each
// run of PyTorch's frameless entries, from just after the forward's last framed entry to just before the first framed
// entry after backward (tensor.backward's free), with the Python frames a real loan lent (capture_lent/torch).
TEST(LentFrames, ARealMergedFileGetsTheBackwardLineAndKeepsItsCategories) {
  auto merged = load_snapshot_file(fixture_path("capture_merged/torch"));
  auto lent_run = load_snapshot_file(fixture_path("capture_lent/torch"));
  ASSERT_TRUE(merged.ok() && lent_run.ok());
  Snapshot s = std::move(merged).value();
  ASSERT_TRUE(s.outside && s.lent_windows.empty() && s.outside->lent_windows.empty());
  // The lender's frames as the capture recorded them on the GPU: the Python frames of a lent engine-thread stack.
  std::vector<std::tuple<std::string, std::string, int64_t>> lender;
  for (uint32_t row = 0; row < lent_run->events.size_rows() && lender.empty(); ++row) {
    bool from_backward = false;  // the lent frames start at torch.autograd.backward, which called the engine
    for (FrameId f : lent_run->stack(lent_run->events.stack[row])) {
      const Frame& fr = lent_run->frames[f];
      const std::string file(lent_run->str(fr.filename));
      from_backward |= file.ends_with("torch/autograd/__init__.py") && lent_run->str(fr.name) == "backward";
      if (from_backward && file.ends_with(".py")) lender.emplace_back(std::string(lent_run->str(fr.name)), file, fr.line);
    }
  }
  ASSERT_GE(lender.size(), 3u);
  ASSERT_EQ(std::get<1>(lender.back()).substr(std::get<1>(lender.back()).rfind('/') + 1), "torch_job.py");

  // The windows live in the capture part, in its own tables, as the capture writes them.
  auto outside = std::make_shared<Snapshot>(*s.outside);
  std::vector<FrameId> ids;
  for (const auto& [name, file, line] : lender) {
    outside->frames.push_back({outside->strings.intern(name), outside->strings.intern(file), line});
    ids.push_back(static_cast<FrameId>(outside->frames.size() - 1));
  }
  const StackId lend = outside->stacks.intern(ids);
  std::vector<LentWindow> windows;
  const EventColumns& ev = s.events;
  const DeviceTrace& d = s.devices[0];
  uint64_t frameless = 0;
  for (uint32_t row = d.begin; row < d.end; ++row) {
    if (ev.stack[row] != 0) continue;
    ++frameless;
    if (row > d.begin && ev.stack[row - 1] == 0) continue;
    uint32_t last = row;
    while (last + 1 < d.end && ev.stack[last + 1] == 0) ++last;
    const int64_t from = row > d.begin ? ev.time_us[row - 1] + 1 : ev.time_us[row];
    const int64_t to = last + 1 < d.end ? ev.time_us[last + 1] - 1 : ev.time_us[last];
    windows.push_back({from, to, outside->strings.intern("backward"), lend});
  }
  ASSERT_EQ(windows.size(), 6u);  // six steps, six backward() calls
  ASSERT_GT(frameless, 100u);

  // Before: the answers as they were.
  const Lifetimes before_lt = build_lifetimes(s);
  const DeviceLifetimes& blt = before_lt.devices[0];
  const Iterations before_it = detect_iterations(s, blt);
  const auto before_cat = categorize(s, blt, before_it, FrameFilter(s));
  ASSERT_TRUE(before_cat.ok());
  auto user_share = [](const Snapshot& snap, const DeviceLifetimes& lt) {
    const FrameFilter ff(snap);
    const uint32_t peak = lt.peak_step();
    uint64_t all = 0, user = 0;
    for (uint32_t i = 0; i < lt.count(); ++i)
      if (lt.alive_at(i, peak)) all += lt.size[i], user += ff.has_user_frame(lt.stack[i]) ? lt.size[i] : 0;
    return static_cast<double>(user) / static_cast<double>(all);
  };
  const double share_before = user_share(s, blt);
  EXPECT_LT(share_before, 0.95);

  // The windows travel inside the capture part and are applied at load.
  outside->lent_windows = windows;
  s.outside = outside;
  auto reloaded = load_snapshot(write_snapshot(s));
  ASSERT_TRUE(reloaded.ok()) << reloaded.error().describe();
  const Snapshot& r = *reloaded;
  EXPECT_EQ(r.outside->lent_windows.size(), 6u);
  const FrameFilter ff(r);
  uint64_t lent = 0;
  ASSERT_EQ(r.devices[0].count(), d.count());
  for (uint32_t k = 0; k < d.count(); ++k) {  // the same entries, in the same order, maybe at other rows
    const StackId st = r.events.stack[r.devices[0].begin + k], was = s.events.stack[d.begin + k];
    ASSERT_EQ(r.unlent(st) == 0, was == 0) << k;  // exactly the frameless entries were lent
    if (was != 0) continue;
    ++lent;
    EXPECT_EQ(FrameFilter::format(r, ff.site(st)), "torch_job.py:20:train_step") << k;
  }
  EXPECT_EQ(lent, frameless);
  const Lifetimes after_lt = build_lifetimes(r);
  const DeviceLifetimes& alt = after_lt.devices[0];
  EXPECT_DOUBLE_EQ(user_share(r, alt), 1.0) << "before: " << share_before;
  // What the allocations are, and where the iterations start, is read from the stacks they were recorded with.
  const Iterations after_it = detect_iterations(r, alt);
  EXPECT_EQ(after_it.boundary, before_it.boundary);
  const auto after_cat = categorize(r, alt, after_it, ff);
  ASSERT_TRUE(after_cat.ok());
  EXPECT_EQ(after_cat->category, before_cat->category);
  EXPECT_EQ(after_cat->reason, before_cat->reason);
}

}  // namespace
}  // namespace allocscope::test
