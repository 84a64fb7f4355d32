// Peak search over the per-step totals and the breakdown of what is alive there (rows, sites, categories, tree).
#include "allocscope/peak.h"

#include <algorithm>
#include <unordered_map>

#include "allocscope/outside.h"
#include "allocscope/timeline.h"

namespace allocscope {

namespace {

uint32_t argmax(const std::vector<uint64_t>& v, uint32_t first, uint32_t last) {
  uint32_t best = first;
  for (uint32_t i = first; i <= last; ++i)
    if (v[i] > v[best]) best = i;
  return best;
}

}  // namespace

FlameTree flame_tree(const Snapshot& s, const DeviceLifetimes& lt, const FrameFilter& ff,
                     const std::vector<uint32_t>& rows) {
  // Build a trie keyed by (parent, frame), then emit it in preorder with children sorted by size.
  struct Node {
    FrameId frame;
    uint32_t parent;
    uint64_t self = 0, total = 0;
    uint32_t count = 0;
    std::vector<uint32_t> children;
  };
  std::vector<Node> nodes;
  nodes.push_back({kNoFrame, kNoRow, 0, 0, 0, {}});
  std::unordered_map<uint64_t, uint32_t> child;
  // Rows sharing a stack walk it once, with their bytes and count summed: a stack is walked per distinct stack, not
  // per row (an audit: 20,000 allocations sharing one 100,000-frame stack took minutes).
  struct Weight {
    StackId stack;
    uint64_t bytes = 0;
    uint32_t count = 0;
  };
  std::vector<Weight> weights;  // first-seen order, so the trie is built as before
  std::unordered_map<StackId, uint32_t> slot;
  for (uint32_t row : rows) {
    auto [it, inserted] = slot.try_emplace(lt.stack[row], static_cast<uint32_t>(weights.size()));
    if (inserted) weights.push_back({lt.stack[row]});
    weights[it->second].bytes += lt.size[row];
    ++weights[it->second].count;
  }
  for (const Weight& w : weights) {
    uint32_t cur = 0;
    const StackId st = w.stack;
    const uint64_t bytes = w.bytes;
    const uint32_t rows_here = w.count;
    nodes[0].total += bytes;
    nodes[0].count += rows_here;
    auto frames = s.stack(st);
    for (size_t k = frames.size(); k-- > 0;) {  // outermost first
      const FrameId f = frames[k];
      if (!ff.visible(f)) continue;
      const uint64_t key = (static_cast<uint64_t>(cur) << 32) | f;
      auto [it, inserted] = child.try_emplace(key, static_cast<uint32_t>(nodes.size()));
      if (inserted) {
        nodes.push_back({f, cur, 0, 0, 0, {}});
        nodes[cur].children.push_back(it->second);
      }
      cur = it->second;
      nodes[cur].total += bytes;
      nodes[cur].count += rows_here;
    }
    nodes[cur].self += bytes;
  }
  FlameTree t;
  const size_t n = nodes.size();
  t.frame.reserve(n);
  std::vector<std::pair<uint32_t, uint32_t>> todo{{0, kNoRow}};  // (node, new parent index)
  std::vector<uint32_t> new_index(n);
  while (!todo.empty()) {
    auto [id, parent] = todo.back();
    todo.pop_back();
    Node& node = nodes[id];
    const uint32_t me = static_cast<uint32_t>(t.frame.size());
    new_index[id] = me;
    t.frame.push_back(node.frame);
    t.parent.push_back(parent);
    t.depth.push_back(parent == kNoRow ? 0 : t.depth[parent] + 1);
    t.end.push_back(0);
    t.self_bytes.push_back(node.self);
    t.total_bytes.push_back(node.total);
    t.count.push_back(node.count);
    std::sort(node.children.begin(), node.children.end(), [&](uint32_t a, uint32_t b) {
      if (nodes[a].total != nodes[b].total) return nodes[a].total > nodes[b].total;
      return nodes[a].frame < nodes[b].frame;
    });
    for (size_t k = node.children.size(); k-- > 0;) todo.push_back({node.children[k], me});
  }
  // Subtree ends: a node's subtree ends where the next node at its depth or shallower starts.
  const uint32_t tn = t.size();
  std::vector<uint32_t> open;
  for (uint32_t i = 0; i < tn; ++i) {
    while (!open.empty() && t.depth[open.back()] >= t.depth[i]) {
      t.end[open.back()] = i;
      open.pop_back();
    }
    open.push_back(i);
  }
  for (uint32_t i : open) t.end[i] = tn;
  return t;
}

Peak find_peak(const Snapshot& s, const DeviceLifetimes& lt, const SegmentTimeline* segments, const FrameFilter& ff,
               const Categories* categories, const PeakOptions& options) {
  Peak p;
  p.device = lt.device;
  // Of a loaded window, only its steps: not the rows kept from before or after it.
  const uint32_t first = lt.windowed() ? lt.window_first() : 0;
  const uint32_t last = lt.windowed() ? lt.window_last() : lt.steps() - 1;
  p.step_offset = lt.step_offset();
  p.step_begin = std::min(std::max(options.step_begin, first), last);
  p.step_end = std::max(p.step_begin, std::min(options.step_end, last));
  p.allocated_step = argmax(lt.total, p.step_begin, p.step_end);
  p.allocated_bytes = lt.total[p.allocated_step];
  p.allocated_time_us = lt.step_time_us(s, p.allocated_step);
  if (segments && segments->total.size() == lt.total.size()) {
    p.reserved_step = argmax(segments->total, p.step_begin, p.step_end);
    p.reserved_bytes = segments->total[p.reserved_step];
    p.reserved_time_us = lt.step_time_us(s, p.reserved_step);
    p.reserved_at_allocated_peak = segments->total[p.allocated_step];
  }

  std::vector<uint32_t> alive;
  for (uint32_t i = 0; i < lt.count(); ++i)
    if (lt.alive_at(i, p.allocated_step)) alive.push_back(i);
  p.alive = static_cast<uint32_t>(alive.size());

  std::vector<uint32_t> by_size = alive;
  const size_t top = std::min<size_t>(options.top, by_size.size());
  std::partial_sort(by_size.begin(), by_size.begin() + top, by_size.end(), [&](uint32_t a, uint32_t b) {
    return lt.size[a] != lt.size[b] ? lt.size[a] > lt.size[b] : a < b;
  });
  p.largest.assign(by_size.begin(), by_size.begin() + top);

  std::unordered_map<FrameId, std::pair<uint64_t, uint32_t>> sites;
  for (uint32_t i : alive) {
    auto& e = sites[ff.site(lt.stack[i])];
    e.first += lt.size[i];
    ++e.second;
  }
  std::vector<std::pair<FrameId, std::pair<uint64_t, uint32_t>>> v(sites.begin(), sites.end());
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
    return a.second.first != b.second.first ? a.second.first > b.second.first : a.first < b.first;
  });
  for (size_t k = 0; k < v.size() && k < options.top; ++k) {
    p.site.push_back(v[k].first);
    p.site_bytes.push_back(v[k].second.first);
    p.site_count.push_back(v[k].second.second);
  }

  if (categories && !is_capture(s)) {  // a capture is split by owner below, not by tensor kind
    p.has_categories = true;
    for (uint32_t i : alive) {
      const int k = static_cast<int>(categories->category[i]);
      p.category_bytes[k] += lt.size[i];
      ++p.category_count[k];
    }
    for (uint32_t i : p.largest) p.largest_category.push_back(categories->category[i]);
  }
  p.tree = flame_tree(s, lt, ff, alive);
  // In a capture every allocation is a reservation: who reserved it is the question (PyTorch's pool, NCCL, ...).
  // At the allocated peak, since a capture records each as segment_alloc then alloc, the reserved peak's step comes
  // one before its last allocation is alive.
  if (is_capture(s)) p.owners = bytes_by_owner(lt, OwnerMap(s), p.allocated_step);
  // A merged snapshot: PyTorch's reserved bytes at its peak, and what the capture saw outside it at that moment.
  else if (s.outside) {
    const OutsideIndex outside(s, lt.device);
    // A device PyTorch recorded nothing on has no PyTorch peak: its outside memory is shown at its own peak.
    p.outside = outside.at(lt.event_count ? p.allocated_time_us : outside.peak_time_us(), options.top);
    p.outside_peak = outside.peak();
    p.owners = owners_with_outside(p.outside.by_owner, p.reserved_at_allocated_peak);
  }
  return p;
}

}  // namespace allocscope
