// "flame": live memory at one step as a call tree (outermost frame at the root), flattened into typed arrays the
// page lays out as an icicle chart. Frames PyTorch's filter hides can be dropped, like its `memory` flame graph.
#include <algorithm>
#include <unordered_map>

#include "allocscope/memviz.h"
#include "timeline_cache.h"

namespace allocscope::wasm {
namespace {

Answer flame(const Request& r, std::span<Loaded* const> files) {
  Loaded& f = *files[0];
  DeviceTimeline* t = timeline_of(f, r.i64("device"));
  if (!t || !t->layout.steps()) return Answer::error("no trace for that device");
  const Snapshot& s = f.snapshot;
  const DeviceLifetimes& lt = *t->lifetimes;
  const uint32_t steps = t->layout.steps();
  int64_t req_step = r.i64("step", -1);
  const uint32_t step = req_step < 0 ? lt.peak_step() : static_cast<uint32_t>(std::min<int64_t>(req_step, steps - 1));
  const bool filter = r.flag("filter", true);

  std::vector<uint32_t> rows;
  t->layout.alive_at(step, &rows);

  // Trie over frames: node 0 is the root; children found through (parent, frame) -> node.
  std::vector<uint32_t> parent{UINT32_MAX}, frame{UINT32_MAX};
  std::vector<double> value{0}, self{0};
  std::vector<uint32_t> count{0};
  std::unordered_map<uint64_t, uint32_t> child;
  std::vector<int8_t> keep(s.frames.size(), -1);
  // Memory whose stack is empty (allocated before recording began, or recorded without stacks), or whose frames the
  // filter all hides, gets a labelled node of its own under the root: it was an unlabelled gap (1.56 GiB, 19% of a
  // GPT-2 peak). Pseudo-frames past the real ones stand for the two.
  const uint32_t kNoStack = UINT32_MAX - 1, kHidden = UINT32_MAX - 2;
  auto add_child = [&](uint32_t node, uint32_t fid) {
    const uint64_t key = (static_cast<uint64_t>(node) << 32) | fid;
    auto [pos, inserted] = child.try_emplace(key, static_cast<uint32_t>(parent.size()));
    if (inserted) {
      parent.push_back(node);
      frame.push_back(fid);
      value.push_back(0);
      self.push_back(0);
      count.push_back(0);
    }
    return pos->second;
  };
  for (uint32_t row : rows) {
    const double sz = static_cast<double>(lt.size[row]);
    uint32_t node = 0;
    value[0] += sz;
    ++count[0];
    auto fs = s.stack(lt.stack[row]);
    for (auto it = fs.rbegin(); it != fs.rend(); ++it) {  // stacks are innermost first
      const FrameId fid = *it;
      if (filter) {
        if (keep[fid] < 0) keep[fid] = memviz::frame_filter(s.str(s.frames[fid].name), s.str(s.frames[fid].filename));
        if (!keep[fid]) continue;
      }
      node = add_child(node, fid);
      value[node] += sz;
      ++count[node];
    }
    if (node == 0) {
      node = add_child(0, fs.empty() ? kNoStack : kHidden);
      value[node] += sz;
      ++count[node];
    }
    self[node] += sz;
  }
  // Frame labels for the frames used, as [name, file, line, frame id] (the id: the page's search marks by it); nodes
  // refer to them by index.
  std::vector<uint32_t> label(frame.size(), UINT32_MAX);
  std::unordered_map<uint32_t, uint32_t> label_of;
  json labels = json::array();
  for (size_t n = 1; n < frame.size(); ++n) {
    auto [pos, inserted] = label_of.try_emplace(frame[n], static_cast<uint32_t>(labels.size()));
    if (inserted && frame[n] >= kHidden) {  // id -1: no frame for the search to mark
      labels.push_back({frame[n] == kNoStack ? "no stack" : "only frames the filter hides", "", nullptr, -1});
    } else if (inserted) {
      const Frame& fr = s.frames[frame[n]];
      labels.push_back({s.str(fr.name), s.str(fr.filename), fr.line_none ? json(nullptr) : fr.line_unsigned ? json(line_text(fr)) : json(fr.line), frame[n]});
    }
    label[n] = pos->second;
  }
  Answer a;
  a.body = {{"step", step}, {"steps", steps}, {"peak_step", lt.peak_step()}, {"total", value[0]},
            {"allocations", rows.size()}, {"labels", labels},
            {"time_us", lt.step_time_us(s, step)}, {"time_first_us", t->time.first_us()},
            {"time_origin_us", time_origin_us(s, *t)}};
  a.add<uint32_t>("parent", "u32", parent);
  a.add<uint32_t>("label", "u32", label);
  a.add<double>("value", "f64", value);
  a.add<double>("self", "f64", self);
  a.add<uint32_t>("count", "u32", count);
  return a;
}

const RegisterMethod r1({"flame", flame});

}  // namespace
}  // namespace allocscope::wasm
