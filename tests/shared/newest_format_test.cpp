// The layout PyTorch 2.12-2.14 write (tests/fixtures/newest, made by generators/gen_newest_format.py from PyTorch's
// key names: no real file exists here): forward_frames behind a marker, FX frames, pinned host memory, and none of
// the new keys counted as unknown or stopping the load.
#include <gtest/gtest.h>

#include <string>

#include "allocscope/frame_filter.h"
#include "allocscope/loader.h"
#include "fixtures.h"

namespace allocscope {
namespace {

const Snapshot& newest() {
  static const Snapshot s = [] {
    auto r = load_snapshot_file(testing::fixture("newest/pt214_training.pickle"));
    EXPECT_TRUE(r.ok()) << r.error().describe();
    return r.ok() ? std::move(r).value() : Snapshot();
  }();
  return s;
}

std::string where(const Snapshot& s, FrameId f) {
  return f < s.frames.size() ? std::string(s.str(s.frames[f].filename)) + ":" + line_text(s.frames[f]) : "none";
}

// Both gradients say where their forward op ran: fc2's, made on the autograd engine's thread with no frames at all,
// and fc1's, made while the main thread's stack was inside loss.backward() (train.py:34, the same for every
// gradient). The site rule takes the forward line for both; the frames PyTorch recorded stay as they were.
TEST(NewestFormat, AGradientsSiteIsItsForwardLine) {
  const Snapshot& s = newest();
  ASSERT_NE(s.forward_marker, Snapshot::kNoForwardMarker);
  const FrameFilter ff(s);
  std::vector<std::string> sites, recorded;
  for (size_t row = 0; row < s.events.size_rows(); ++row) {
    if (s.events.action[row] != Action::kAlloc || s.events.size[row] != (2u << 20)) continue;
    const StackId st = s.events.stack[row];
    sites.push_back(where(s, ff.site(st)));
    recorded.push_back(std::to_string(s.recorded_stack(st).size()) + " of " + std::to_string(s.stack(st).size()));
  }
  EXPECT_EQ(sites, (std::vector<std::string>{"/work/model.py:13", "/work/model.py:12"}));
  // fc2's: no frames recorded, then the marker and its 6 forward frames; fc1's: 4 recorded, marker, 6.
  EXPECT_EQ(recorded, (std::vector<std::string>{"0 of 7", "4 of 11"}));
}

TEST(NewestFormat, FxFramesKeepTheirNodeAndOriginalCode) {
  const Snapshot& s = newest();
  int fx = 0;
  for (const Frame& f : s.frames) {
    if (!f.fx) continue;
    ++fx;
    const std::string text(s.str(f.fx));
    EXPECT_EQ(text.rfind("node=addmm, op=call_function, target=aten.addmm.default\n", 0), 0u) << text;
    EXPECT_NE(text.find("x = self.fc1(x)"), std::string::npos) << text;
  }
  EXPECT_EQ(fx, 1);
}

TEST(NewestFormat, PinnedHostMemoryIsASnapshotOfItsOwn) {
  const Snapshot& s = newest();
  ASSERT_TRUE(s.host);
  EXPECT_EQ(s.host->segments.size(), 1u);
  ASSERT_EQ(s.host->devices.size(), 1u);
  EXPECT_EQ(s.host->devices[0].count(), 2u);
  // The device's trace keeps its own 12 entries: the host's are not read into it, nor warned about.
  ASSERT_EQ(s.devices.size(), 1u);
  EXPECT_EQ(s.devices[0].count(), 12u);
  for (const std::string& w : s.warnings) EXPECT_EQ(w.find("outside device_traces"), std::string::npos) << w;
}

TEST(NewestFormat, TheNewKeysAreReadNotCounted) {
  const Snapshot& s = newest();
  for (const auto& [key, n] : s.unknown_keys)
    for (const char* known : {"forward_frames", "host_segments", "host_traces", "fx_node_op", "fx_node_name",
                              "fx_node_target", "fx_original_trace"})
      EXPECT_NE(key, known) << "counted as unknown " << n << " time(s)";
}

// Unknown keys never stop a load: a trace entry, a frame and the top level with keys no PyTorch writes (yet).
TEST(NewestFormat, UnknownKeysNeverStopALoad) {
  // pickle.dumps({'segments': [], 'device_traces': [[{'action': 'alloc', 'addr': 1, 'size': 2, 'stream': 0,
  //   'time_us': 3, 'frames': [{'name': 'f', 'filename': 'a.py', 'line': 1, 'fx_future': 1}], 'future': [1]}]],
  //   'future_top': {}}, protocol=2)
  const std::string p(
      "\200\002}q\000(X\010\000\000\000segmentsq\001]q\002X\015\000\000\000device_tracesq\003]q\004]q\005}q\006"
      "(X\006\000\000\000actionq\007X\005\000\000\000allocq\010X\004\000\000\000addrq\011K\001X\004\000\000\000"
      "sizeq\012K\002X\006\000\000\000streamq\013K\000X\007\000\000\000time_usq\014K\003X\006\000\000\000frames"
      "q\015]q\016}q\017(X\004\000\000\000nameq\020X\001\000\000\000fq\021X\010\000\000\000filenameq\022X\004"
      "\000\000\000a.pyq\023X\004\000\000\000lineq\024K\001X\011\000\000\000fx_futureq\025K\001uaX\006\000\000"
      "\000futureq\026]q\027K\001auaaX\012\000\000\000future_topq\030}q\031u.",
      278);
  auto r = load_snapshot(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(p.data()), p.size()));
  ASSERT_TRUE(r.ok()) << r.error().describe();
  EXPECT_EQ(r->events.size_rows(), 1u);
  std::vector<std::string> keys;
  for (const auto& [key, n] : r->unknown_keys) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"future", "future_top", "fx_future"}));
}

}  // namespace
}  // namespace allocscope
