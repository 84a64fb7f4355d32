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
  // A driver OOM of PyTorch's own cudaMalloc is in PyTorch's trace: other events also go by their stack.
  keep_allocations(c, [&](StackId st) { return owners.owner(st) != Owner::kPyTorch; }, &out);
  return out;
}

Result<std::vector<uint8_t>> merge_outside(std::span<const uint8_t> pytorch_pickle, const Snapshot& outside) {
  // Load PyTorch's pickle once (the compact model, not a tree of its values) to check it is a PyTorch snapshot and
  // learn how many memo slots it used: the appended part memoizes from there, so no slot is written twice (Python's
  // and MemoryViz's unpicklers would accept it; a pickle checker would not).
  LoadOptions::PickleFacts facts;
  {
    LoadOptions o;
    o.facts = &facts;
    auto pt = load_snapshot(pytorch_pickle, o);
    if (!pt.ok()) return Error{"PyTorch's snapshot: " + pt.error().message, pt.error().offset};
    if (is_capture(pt.value()))
      return Error{"this is a capture's snapshot, not PyTorch's (torch.cuda.memory._dump_snapshot)", 0};
    if (pt.value().outside) return Error{"this snapshot is already merged (it has 'allocscope_outside')", 0};
  }
  if (!facts.root_is_dict)
    return Error{"PyTorch's snapshot is a bare list of segments (PyTorch 2.0); only a dict can carry the outside "
                 "memory", 0};
  if (pytorch_pickle.empty() || pytorch_pickle.back() != '.')
    return Error{"PyTorch's snapshot does not end with the pickle STOP opcode", pytorch_pickle.size()};
  if (facts.memo_slots > UINT32_MAX / 2)
    return Error{"PyTorch's snapshot uses more memo slots than a pickle can append to", pytorch_pickle.size()};

  pickle::Writer w(pickle::Writer::Fragment{static_cast<uint32_t>(facts.memo_slots)});
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

OutsideIndex::OutsideIndex(const Snapshot& merged, int64_t device) {
  if (!merged.outside) return;
  outside_ = merged.outside.get();
  lt_ = build_device_lifetimes(*outside_, device);
  owners_ = OwnerMap(*outside_);
  ff_ = FrameFilter(*outside_);
  time_.reserve(lt_.event_count);
  int64_t last = INT64_MIN;
  for (uint32_t i = 0; i < lt_.event_count; ++i)
    time_.push_back(last = std::max(last, outside_->events.time_us[lt_.event_begin + i]));
  for (uint64_t t : lt_.total) peak_ = std::max(peak_, t);
}

// Step s is the state after the first s events: the events stamped at or before the time.
uint32_t OutsideIndex::step_at(int64_t time_us) const {
  return static_cast<uint32_t>(std::upper_bound(time_.begin(), time_.end(), time_us) - time_.begin());
}

uint64_t OutsideIndex::bytes_at(int64_t time_us) const {
  const uint32_t step = step_at(time_us);
  return step < lt_.total.size() ? lt_.total[step] : 0;
}

OutsideAt OutsideIndex::at(int64_t time_us, size_t top_sites) const {
  OutsideAt r;
  if (!outside_) return r;
  const uint32_t step = step_at(time_us);
  r.by_owner = bytes_by_owner(lt_, owners_, step);
  std::unordered_map<FrameId, uint64_t> sites;
  for (uint32_t i = 0; i < lt_.count(); ++i) {
    if (!lt_.alive_at(i, step)) continue;
    r.bytes += lt_.size[i];
    if (top_sites) sites[ff_.site(lt_.stack[i])] += lt_.size[i];
  }
  r.sites.assign(sites.begin(), sites.end());
  std::sort(r.sites.begin(), r.sites.end(),
            [](const auto& a, const auto& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
  if (r.sites.size() > top_sites) r.sites.resize(top_sites);
  return r;
}

OutsideAt outside_at(const Snapshot& merged, int64_t device, int64_t time_us, size_t top_sites) {
  return OutsideIndex(merged, device).at(time_us, top_sites);
}

std::vector<std::pair<Owner, uint64_t>> owners_with_outside(std::vector<std::pair<Owner, uint64_t>> out,
                                                            uint64_t pytorch_reserved) {
  if (pytorch_reserved) out.emplace_back(Owner::kPyTorch, pytorch_reserved);
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

}  // namespace allocscope
