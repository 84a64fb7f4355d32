// Lending the waiting call's frames to PyTorch's frameless entries (lent_frames.h): a sweep over the entries in time
// order with the windows open at each moment in a heap, newest start on top.
#include "allocscope/lent_frames.h"

#include <algorithm>
#include <map>
#include <queue>
#include <unordered_map>
#include <vector>

namespace allocscope {

bool has_python_frame(const Snapshot& s, StackId id) {
  if (id >= s.stacks.size()) return false;
  for (FrameId f : s.stack(id)) {
    if (f >= s.frames.size()) continue;
    const std::string_view file = s.str(s.frames[f].filename);
    if (!file.empty() && file.front() == '<') return true;
    if (file.size() >= 3 && file.substr(file.size() - 3) == ".py") return true;
  }
  return false;
}

namespace {

struct Candidate {
  int64_t time;
  uint32_t row;
};

}  // namespace

LentCount lend_window_frames(Snapshot* s, std::span<const LentWindow> windows) {
  LentCount count;
  // Windows that can hold an entry, in order of start (then of position, so that the later one wins a tie).
  std::vector<uint32_t> order;
  for (uint32_t w = 0; w < windows.size(); ++w)
    if (windows[w].start_us <= windows[w].end_us && windows[w].stack != 0 && windows[w].stack < s->stacks.size())
      order.push_back(w);
  if (order.empty()) return count;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return windows[a].start_us != windows[b].start_us ? windows[a].start_us < windows[b].start_us : a < b;
  });

  // Entries without a Python frame, on devices whose trace records times.
  EventColumns& ev = s->events;
  std::vector<int8_t> python(s->stacks.size(), -1);  // per stack: has_python_frame, computed once
  auto frameless = [&](StackId st) {
    if (st >= python.size()) return false;
    if (python[st] < 0) python[st] = has_python_frame(*s, st) ? 1 : 0;
    return python[st] == 0;
  };
  std::vector<Candidate> rows;
  for (const DeviceTrace& d : s->devices) {
    if (d.end > ev.size_rows() || d.begin > d.end || !records_times(ev, d.begin, d.end)) continue;
    for (uint32_t row = d.begin; row < d.end; ++row)
      if (frameless(ev.stack[row])) rows.push_back({ev.time_us[row], row});
  }
  if (rows.empty()) return count;
  std::sort(rows.begin(), rows.end(),
            [](const Candidate& a, const Candidate& b) { return a.time != b.time ? a.time < b.time : a.row < b.row; });

  // The sweep: windows enter the heap when they start (less the slack) and leave it, lazily, once they ended (plus
  // the slack) before the current entry; the heap's top is then the newest window holding the entry.
  auto newer = [&](uint32_t a, uint32_t b) {  // heap order: "a below b"
    return windows[a].start_us != windows[b].start_us ? windows[a].start_us < windows[b].start_us : a < b;
  };
  std::priority_queue<uint32_t, std::vector<uint32_t>, decltype(newer)> open(newer);
  auto saturating = [](int64_t t, int64_t d) {
    return d > 0 ? (t > INT64_MAX - d ? INT64_MAX : t + d) : (t < INT64_MIN - d ? INT64_MIN : t + d);
  };
  std::map<std::pair<StackId, StackId>, StackId> made;  // (the entry's stack, the window's) -> the lent stack
  std::vector<FrameId> frames;
  size_t next = 0;
  for (const Candidate& c : rows) {
    while (next < order.size() && saturating(windows[order[next]].start_us, -kLentSlackUs) <= c.time)
      open.push(order[next++]);
    while (!open.empty() && saturating(windows[open.top()].end_us, kLentSlackUs) < c.time) open.pop();
    if (open.empty()) continue;
    const StackId own = ev.stack[c.row], lender = windows[open.top()].stack;
    auto [it, fresh] = made.try_emplace({own, lender}, 0);
    if (fresh) {
      // Copied first: interning may move the table the spans point into.
      frames.assign(s->stack(own).begin(), s->stack(own).end());
      frames.insert(frames.end(), s->stack(lender).begin(), s->stack(lender).end());
      it->second = s->stacks.intern(frames);
    }
    ev.stack[c.row] = it->second;
    ++count.rows;
  }
  if (!count.rows) return count;
  for (const auto& [key, lent] : made) s->lent_stacks.emplace_back(lent, key.first);
  std::sort(s->lent_stacks.begin(), s->lent_stacks.end());
  s->lent_stacks.erase(std::unique(s->lent_stacks.begin(), s->lent_stacks.end(),
                                   [](const auto& a, const auto& b) { return a.first == b.first; }),
                       s->lent_stacks.end());

  // The final segments: a live block (segment) keeps the frames of the alloc (segment_alloc) that made it, so it
  // gets what that entry got. The last such entry at its address wins, unless a free came after it.
  std::unordered_map<uint64_t, uint32_t> block_row, segment_row;  // key: address ^ device in the top bits
  auto key = [](int64_t device, uint64_t addr) { return addr ^ (static_cast<uint64_t>(device & 0xff) << 56); };
  for (const DeviceTrace& d : s->devices) {
    if (d.end > ev.size_rows() || d.begin > d.end) continue;
    for (uint32_t row = d.begin; row < d.end; ++row) {
      const uint64_t k = key(d.device, ev.addr[row]);
      switch (ev.action[row]) {
        case Action::kAlloc: block_row[k] = row; break;
        case Action::kFreeCompleted: block_row.erase(k); break;
        case Action::kSegmentAlloc: segment_row[k] = row; break;
        case Action::kSegmentFree: segment_row.erase(k); break;
        default: break;
      }
    }
  }
  auto lent_for = [&](const std::unordered_map<uint64_t, uint32_t>& rows_at, int64_t device, uint64_t addr,
                      StackId own) -> StackId {
    auto it = rows_at.find(key(device, addr));
    if (it == rows_at.end()) return 0;
    const StackId now = ev.stack[it->second];
    return now != own && s->unlent(now) == own ? now : 0;
  };
  for (Segment& seg : s->segments) {
    if (frameless(seg.stack))
      if (const StackId st = lent_for(segment_row, seg.device, seg.address, seg.stack)) seg.stack = st, ++count.segments;
    for (uint32_t b = seg.first_block; b < seg.first_block + seg.num_blocks && b < s->blocks.size(); ++b) {
      Block& block = s->blocks[b];
      if (block.state == BlockState::kInactive || !frameless(block.stack)) continue;
      if (const StackId st = lent_for(block_row, seg.device, block.address, block.stack)) block.stack = st, ++count.blocks;
    }
  }
  return count;
}

}  // namespace allocscope
