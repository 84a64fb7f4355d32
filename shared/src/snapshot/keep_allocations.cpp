// Keeping part of a snapshot's allocations (keep_allocations.h).
#include "allocscope/keep_allocations.h"

#include <unordered_map>

namespace allocscope {

bool is_allocation(Action a) { return a == Action::kAlloc || a == Action::kSegmentAlloc || a == Action::kSegmentMap; }

bool is_release(Action a) {
  return a == Action::kFreeRequested || a == Action::kFreeCompleted || a == Action::kSegmentFree ||
         a == Action::kSegmentUnmap;
}

StackId segment_stack(const Snapshot& s, const Segment& seg) {
  const auto blocks = s.blocks_of(seg);
  return !blocks.empty() ? blocks.front().stack : seg.stack;
}

void keep_allocations(const Snapshot& c, const std::function<bool(uint32_t)>& keep_row,
                      const std::function<bool(const Segment&)>& keep_segment, Snapshot* out) {
  for (const DeviceTrace& d : c.devices) {
    DeviceTrace nd;
    nd.device = d.device;
    nd.begin = static_cast<uint32_t>(out->events.size_rows());
    // A free's stack is the freeing code's (PyTorch's empty_cache frees what NCCL never touched, and the reverse),
    // so a release goes with the allocation it releases; one whose allocation the trace lost decides by itself.
    std::unordered_map<uint64_t, bool> kept;
    for (uint32_t row = d.begin; row < d.end; ++row) {
      const Action a = c.events.action[row];
      const uint64_t addr = c.events.addr[row];
      bool keep;
      if (is_allocation(a)) {
        keep = keep_row(row);
        kept[addr] = keep;
      } else if (is_release(a)) {
        auto it = kept.find(addr);
        keep = it != kept.end() ? it->second : keep_row(row);
      } else {
        keep = keep_row(row);
      }
      if (keep) out->events.append_row(c.events, row);
    }
    nd.end = static_cast<uint32_t>(out->events.size_rows());
    out->devices.push_back(nd);
  }
  for (const Segment& seg : c.segments) {
    if (!keep_segment(seg)) continue;
    const auto blocks = c.blocks_of(seg);
    Segment ns = seg;
    ns.first_block = static_cast<uint32_t>(out->blocks.size());
    out->blocks.insert(out->blocks.end(), blocks.begin(), blocks.end());
    out->segments.push_back(ns);
  }
}

}  // namespace allocscope
