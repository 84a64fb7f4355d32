// Memory outside PyTorch's allocator: the capture's part of a merged snapshot (outside.h).
#include "allocscope/outside.h"

#include <algorithm>
#include <climits>
#include <unordered_map>

#include "allocscope/frame_filter.h"
#include "allocscope/lifetimes.h"
#include "allocscope/loader.h"
#include "allocscope/pickle.h"
#include "allocscope/writer.h"

namespace allocscope {

namespace {

void copy_row(const EventColumns& from, size_t row, EventColumns* to) {
  to->action.push_back(from.action[row]);
  to->addr.push_back(from.addr[row]);
  to->size.push_back(from.size[row]);
  to->stream.push_back(from.stream[row]);
  to->time_us.push_back(from.time_us[row]);
  to->stack.push_back(from.stack[row]);
  to->compile_context.push_back(from.compile_context[row]);
  to->user_metadata.push_back(from.user_metadata[row]);
  if (row < from.layout.size()) to->layout.push_back(from.layout[row]);
}

bool is_allocation(Action a) { return a == Action::kAlloc || a == Action::kSegmentAlloc || a == Action::kSegmentMap; }
bool is_release(Action a) {
  return a == Action::kFreeRequested || a == Action::kFreeCompleted || a == Action::kSegmentFree ||
         a == Action::kSegmentUnmap;
}

}  // namespace

Snapshot outside_of_pytorch(const Snapshot& c) {
  Snapshot out;
  out.strings = c.strings;
  out.frames = c.frames;
  out.stacks = c.stacks;
  out.entry_layouts = c.entry_layouts;
  out.allocator_settings = c.allocator_settings;
  out.annotations = c.annotations;
  out.has_device_traces = c.has_device_traces;
  const OwnerMap owners(c);
  auto outside = [&](StackId st) { return owners.owner(st) != Owner::kPyTorch; };
  for (const DeviceTrace& d : c.devices) {
    DeviceTrace nd;
    nd.device = d.device;
    nd.begin = static_cast<uint32_t>(out.events.size_rows());
    // A free's stack is the freeing code's (PyTorch's empty_cache frees what NCCL never touched, and the reverse),
    // so a release goes with the allocation it releases; one whose allocation the trace lost decides by itself.
    std::unordered_map<uint64_t, bool> kept;
    for (uint32_t row = d.begin; row < d.end; ++row) {
      const Action a = c.events.action[row];
      const uint64_t addr = c.events.addr[row];
      bool keep;
      if (is_allocation(a)) {
        keep = outside(c.events.stack[row]);
        kept[addr] = keep;
      } else if (is_release(a)) {
        auto it = kept.find(addr);
        keep = it != kept.end() ? it->second : outside(c.events.stack[row]);
      } else {
        keep = outside(c.events.stack[row]);  // a driver OOM of PyTorch's own cudaMalloc is in PyTorch's trace
      }
      if (keep) copy_row(c.events, row, &out.events);
    }
    nd.end = static_cast<uint32_t>(out.events.size_rows());
    out.devices.push_back(nd);
  }
  for (const Segment& seg : c.segments) {
    const auto blocks = c.blocks_of(seg);
    const StackId st = !blocks.empty() ? blocks.front().stack : seg.stack;
    if (!outside(st)) continue;
    Segment ns = seg;
    ns.first_block = static_cast<uint32_t>(out.blocks.size());
    out.blocks.insert(out.blocks.end(), blocks.begin(), blocks.end());
    out.segments.push_back(ns);
  }
  return out;
}

Result<std::vector<uint8_t>> merge_outside(std::span<const uint8_t> pytorch_pickle, const Snapshot& outside) {
  // Read PyTorch's pickle once to learn its top-level type and how many memo slots it used: the appended part
  // memoizes from there, so no slot is written twice (Python's and MemoryViz's unpicklers would accept it; a pickle
  // checker would not).
  StringTable strings;
  pickle::Reader reader(&strings);
  auto root = reader.run(pytorch_pickle);
  if (!root.ok()) return Error{"PyTorch's snapshot: " + root.error().describe()};
  if (root.value().tag != pickle::Tag::kDict)
    return Error{"PyTorch's snapshot is not a dict (a bare list of segments: PyTorch 2.0); only a dict can carry the "
                 "outside memory"};
  if (pytorch_pickle.empty() || pytorch_pickle.back() != '.')
    return Error{"PyTorch's snapshot does not end with the pickle STOP opcode", pytorch_pickle.size()};
  if (reader.memo_size() > UINT32_MAX / 2) return Error{"PyTorch's snapshot uses too many memo slots"};

  pickle::Writer w(pickle::Writer::Fragment{static_cast<uint32_t>(reader.memo_size())});
  w.key("allocscope_outside");
  const std::vector<uint8_t> value = write_snapshot_value(outside, &w);
  std::vector<uint8_t> out;
  out.reserve(pytorch_pickle.size() + value.size() + 2);
  // Before STOP the unpickler's stack holds the top-level dict: key, value, SETITEM sets one more item on it.
  out.insert(out.end(), pytorch_pickle.begin(), pytorch_pickle.end() - 1);
  out.insert(out.end(), value.begin(), value.end());
  out.push_back('s');  // SETITEM
  out.push_back('.');  // STOP
  auto check = load_snapshot(out);
  if (!check.ok()) return Error{"the merged snapshot does not load back: " + check.error().describe()};
  if (!check.value().outside) return Error{"the merged snapshot lost its outside part"};
  return out;
}

OutsideAt outside_at(const Snapshot& merged, int64_t device, int64_t time_us, size_t top_sites) {
  OutsideAt r;
  if (!merged.outside) return r;
  const Snapshot& o = *merged.outside;
  const DeviceLifetimes lt = build_device_lifetimes(o, device);
  // Step s is the state after the first s events: count the events stamped at or before the time.
  uint32_t step = 0;
  for (uint32_t i = 0; i < lt.event_count; ++i)
    if (o.events.time_us[lt.event_begin + i] <= time_us) step = i + 1;
  r.by_owner = bytes_by_owner(lt, OwnerMap(o), step);
  const FrameFilter ff(o);
  std::unordered_map<FrameId, uint64_t> sites;
  for (uint32_t i = 0; i < lt.count(); ++i) {
    if (!lt.alive_at(i, step)) continue;
    r.bytes += lt.size[i];
    sites[ff.site(lt.stack[i])] += lt.size[i];
  }
  r.sites.assign(sites.begin(), sites.end());
  std::sort(r.sites.begin(), r.sites.end(),
            [](const auto& a, const auto& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
  if (r.sites.size() > top_sites) r.sites.resize(top_sites);
  return r;
}

OutsideSeries::OutsideSeries(const Snapshot& merged, int64_t device) {
  total_.push_back(0);
  if (!merged.outside) return;
  const Snapshot& o = *merged.outside;
  const DeviceLifetimes lt = build_device_lifetimes(o, device);
  total_ = lt.total;
  time_.reserve(lt.event_count);
  int64_t last = INT64_MIN;
  for (uint32_t i = 0; i < lt.event_count; ++i) time_.push_back(last = std::max(last, o.events.time_us[lt.event_begin + i]));
  for (uint64_t t : total_) peak_ = std::max(peak_, t);
}

uint64_t OutsideSeries::at(int64_t time_us) const {
  const size_t step = static_cast<size_t>(std::upper_bound(time_.begin(), time_.end(), time_us) - time_.begin());
  return step < total_.size() ? total_[step] : 0;
}

std::vector<std::pair<Owner, uint64_t>> owners_with_outside(const Snapshot& merged, int64_t device,
                                                            uint64_t pytorch_reserved, int64_t time_us) {
  std::vector<std::pair<Owner, uint64_t>> out = outside_at(merged, device, time_us, 0).by_owner;
  if (pytorch_reserved) out.emplace_back(Owner::kPyTorch, pytorch_reserved);
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

}  // namespace allocscope
