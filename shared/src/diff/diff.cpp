// Snapshot diff: segment sets by (address, size) and live bytes per stack text, merged over both files.
#include "allocscope/diff.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "allocscope/frame_filter.h"
#include "allocscope/lifetimes.h"

namespace allocscope {

namespace {

struct Group {
  std::string site;
  uint64_t bytes[2] = {0, 0};
  uint32_t count[2] = {0, 0};
};

// Adds one snapshot's live blocks to the groups; stack texts are computed once per distinct stack.
void add_live(const Snapshot& s, int side, std::map<std::string, Group>* groups, uint64_t* live) {
  const FrameFilter ff(s);
  std::unordered_map<StackId, std::map<std::string, Group>::iterator> by_stack;
  for (const Block& b : s.blocks) {
    if (b.state != BlockState::kActiveAllocated) continue;
    auto it = by_stack.find(b.stack);
    if (it == by_stack.end()) {
      std::string key;
      auto frames = s.stack(b.stack);
      for (size_t k = frames.size(); k-- > 0;) {
        if (!ff.visible(frames[k])) continue;
        if (!key.empty()) key += ';';
        key += FrameFilter::format(s, frames[k]);
      }
      if (key.empty()) key = "<no frames>";
      auto g = groups->try_emplace(key).first;
      if (g->second.site.empty()) g->second.site = FrameFilter::site_text(s, ff.site(b.stack));
      it = by_stack.emplace(b.stack, g).first;
    }
    it->second->second.bytes[side] += b.requested_size;
    ++it->second->second.count[side];
    *live += b.requested_size;
  }
}

void only_in(const Snapshot& x, const std::set<std::pair<uint64_t, uint64_t>>& other, std::vector<uint64_t>* addr,
             std::vector<uint64_t>* size) {
  std::set<std::pair<uint64_t, uint64_t>> seen;
  for (const Segment& seg : x.segments) {
    const std::pair<uint64_t, uint64_t> key{seg.address, seg.total_size};
    if (other.count(key) || !seen.insert(key).second) continue;
    addr->push_back(seg.address);
    size->push_back(seg.total_size);
  }
}

}  // namespace

SnapshotDiff diff_snapshots(const Snapshot& a, const Snapshot& b, const Lifetimes* la, const Lifetimes* lb) {
  SnapshotDiff d;
  auto peaks = [](const Snapshot& s, const Lifetimes* given, std::vector<std::pair<int64_t, uint64_t>>* out,
                  std::vector<int64_t>* no_trace) {
    const Lifetimes built = given ? Lifetimes{} : build_lifetimes(s);
    for (const DeviceLifetimes& lt : (given ? *given : built).devices) {
      out->emplace_back(lt.device, lt.total[lt.peak_step()]);
      if (lt.event_count == 0) no_trace->push_back(lt.device);
    }
  };
  peaks(a, la, &d.peaks_a, &d.no_trace_a);
  peaks(b, lb, &d.peaks_b, &d.no_trace_b);
  std::set<std::pair<uint64_t, uint64_t>> sa, sb;
  for (const Segment& seg : a.segments) {
    sa.insert({seg.address, seg.total_size});
    d.reserved_a += seg.total_size;
  }
  for (const Segment& seg : b.segments) {
    sb.insert({seg.address, seg.total_size});
    d.reserved_b += seg.total_size;
  }
  only_in(a, sb, &d.only_a_addr, &d.only_a_size);
  only_in(b, sa, &d.only_b_addr, &d.only_b_size);

  std::map<std::string, Group> groups;
  add_live(a, 0, &groups, &d.live_a);
  add_live(b, 1, &groups, &d.live_b);
  std::vector<std::map<std::string, Group>::const_iterator> order;
  for (auto it = groups.cbegin(); it != groups.cend(); ++it) order.push_back(it);
  auto delta = [](const Group& g) { return static_cast<int64_t>(g.bytes[1]) - static_cast<int64_t>(g.bytes[0]); };
  auto mag = [&](const Group& g) -> uint64_t {
    const int64_t x = delta(g);
    return x < 0 ? 0 - static_cast<uint64_t>(x) : static_cast<uint64_t>(x);
  };
  std::stable_sort(order.begin(), order.end(), [&](auto x, auto y) { return mag(x->second) > mag(y->second); });
  for (auto it : order) {
    d.stack.push_back(it->first);
    d.site.push_back(it->second.site);
    d.bytes_a.push_back(it->second.bytes[0]);
    d.bytes_b.push_back(it->second.bytes[1]);
    d.count_a.push_back(it->second.count[0]);
    d.count_b.push_back(it->second.count[1]);
    d.delta.push_back(delta(it->second));
  }
  return d;
}

}  // namespace allocscope
