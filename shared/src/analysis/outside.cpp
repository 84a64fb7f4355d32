// Memory outside PyTorch's allocator: the capture's part of a merged snapshot (outside.h).
#include "allocscope/outside.h"

#include <algorithm>
#include <climits>
#include <unordered_map>

#include "allocscope/frame_filter.h"
#include "allocscope/keep_allocations.h"
#include "allocscope/lifetimes.h"
#include "allocscope/loader.h"
#include "allocscope/pickle.h"
#include "allocscope/writer.h"
#include "allocscope/owners.h"

namespace allocscope {

namespace {

// The two recorders stamp one cudaMalloc 1-23 us apart (measured on the three kept pairs); a second is far more than
// that and far less than the time before an address of the same size comes back from another library.
constexpr int64_t kSameCallUs = 1'000'000;

uint64_t key_of(int64_t device, uint64_t addr) { return addr ^ (static_cast<uint64_t>(device) * 0x9E3779B97F4A7C15ull); }

bool has_times(const Snapshot& s) { return records_times(s.events, 0, s.events.size_rows()); }

// A failed cudaMalloc under PyTorch's OOM asks for the request rounded up to the allocator's segment size (2 MiB,
// or 20 MiB for requests of 1-10 MiB), while PyTorch's 'oom' entry carries the request rounded to 512 bytes.
constexpr uint64_t kOomRounding = 20ull << 20;

// PyTorch's own record of the device memory it reserved: each segment_alloc/segment_map (device, address, size, time)
// of its trace, and each segment it still holds.
class PyTorchRecord {
 public:
  explicit PyTorchRecord(const Snapshot& pt) : timed_(has_times(pt)) {
    for (const DeviceTrace& d : pt.devices)
      for (uint32_t row = d.begin; row < d.end; ++row) {
        const Call c{d.device, pt.events.addr[row], pt.events.size[row], pt.events.time_us[row]};
        if (pt.events.action[row] == Action::kSegmentAlloc) calls_.emplace(key_of(d.device, c.addr), c);
        else if (pt.events.action[row] == Action::kSegmentMap) maps_.add(c);
        else if (pt.events.action[row] == Action::kOom) ooms_.push_back(c);  // its addr is device_free: unused
      }
    for (const Segment& seg : pt.segments) held_.add(Call{seg.device, seg.address, seg.total_size, 0});
    maps_.sort();
    held_.sort();
  }
  size_t calls() const { return calls_.size() + maps_.size(); }
  size_t held() const { return held_.size(); }
  // Whether PyTorch's trace shows this allocation; `timed`: the capture has times (else, like a PyTorch file without
  // times, any time matches). An expandable segment's segment_map covers what the driver saw as one cuMemMap per
  // 2 or 20 MiB page, so a capture's map inside one counts.
  bool called(int64_t device, uint64_t addr, uint64_t size, int64_t time_us, bool timed) const {
    auto near = [&](const Call& c) { return !timed || !timed_ || std::llabs(c.time_us - time_us) <= kSameCallUs; };
    auto [a, b] = calls_.equal_range(key_of(device, addr));
    for (auto it = a; it != b; ++it) {
      const Call& c = it->second;
      if (c.device == device && c.addr == addr && c.size == size && near(c)) return true;
    }
    return maps_.any_within(device, addr, size, near);
  }
  // Whether PyTorch recorded an OOM of this size then: the driver's failed cudaMalloc calls under it (PyTorch
  // retries once after freeing its cache) are its own.
  bool ran_out(int64_t device, uint64_t size, int64_t time_us, bool timed) const {
    for (const Call& c : ooms_)
      if (c.device == device && size >= c.size && size - c.size < kOomRounding &&
          (!timed || !timed_ || std::llabs(c.time_us - time_us) <= kSameCallUs))
        return true;
    return false;
  }
  // Whether PyTorch holds this range in one of its segments (an expandable one holds many of the driver's maps).
  bool holds(int64_t device, uint64_t addr, uint64_t size) const {
    return held_.any_within(device, addr, size, [](const Call&) { return true; });
  }

 private:
  struct Call {
    int64_t device;
    uint64_t addr, size;
    int64_t time_us;
  };
  // Ranges by (device, start), answering which of them contain a range. They may overlap (a range mapped, unmapped
  // and mapped again), so the search walks back over the ranges that start early enough to reach.
  class Ranges {
   public:
    void add(const Call& c) {
      v_.push_back(c);
      longest_ = std::max(longest_, c.size);
    }
    void sort() {
      std::sort(v_.begin(), v_.end(), [](const Call& x, const Call& y) {
        return x.device != y.device ? x.device < y.device : x.addr < y.addr;
      });
    }
    size_t size() const { return v_.size(); }
    template <class Pred>
    bool any_within(int64_t device, uint64_t addr, uint64_t size, Pred ok) const {
      auto it = std::upper_bound(v_.begin(), v_.end(), std::make_pair(device, addr), [](const auto& k, const Call& c) {
        return k.first != c.device ? k.first < c.device : k.second < c.addr;
      });
      // At most kWalk ranges back: a hostile file of many huge overlapping ranges must not make each query linear
      // (a range not found counts as outside PyTorch, as without this record).
      constexpr int kWalk = 256;
      for (int walked = 0; it != v_.begin() && walked < kWalk; ++walked) {
        const Call& c = *--it;
        if (c.device != device || addr - c.addr > longest_) break;
        if (addr - c.addr <= c.size && size <= c.size - (addr - c.addr) && ok(c)) return true;
      }
      return false;
    }

   private:
    std::vector<Call> v_;
    uint64_t longest_ = 0;
  };
  bool timed_;
  std::unordered_multimap<uint64_t, Call> calls_;
  Ranges maps_, held_;
  std::vector<Call> ooms_;
};

// The device ordinal of each trace row (rows outside any device trace get -1).
std::vector<int64_t> device_of_rows(const Snapshot& s) {
  std::vector<int64_t> dev(s.events.size_rows(), -1);
  for (const DeviceTrace& d : s.devices)
    for (uint32_t row = d.begin; row < d.end; ++row) dev[row] = d.device;
  return dev;
}

std::pair<int64_t, int64_t> time_range(const Snapshot& s) {
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (uint64_t row = 0; row < s.events.size_rows(); ++row) {
    const int64_t t = s.events.time_us[row];
    if (t == 0) continue;
    lo = std::min(lo, t);
    hi = std::max(hi, t);
  }
  return {lo, hi};
}

}  // namespace

Snapshot outside_of_pytorch(const Snapshot& c, const Snapshot& pytorch) {
  Snapshot out;
  out.strings = c.strings;
  out.frames = c.frames;
  out.stacks = c.stacks;
  out.entry_layouts = c.entry_layouts;
  out.allocator_settings = c.allocator_settings;
  out.annotations = c.annotations;
  out.lent_windows = c.lent_windows;  // the merged file's PyTorch part is lent their frames when loaded
  out.has_device_traces = c.has_device_traces;
  const OwnerMap owners(c);
  const PyTorchRecord record(pytorch);
  // PyTorch's frames say PyTorch's pool only where PyTorch's snapshot shows that pool: with its caching allocator off
  // (PYTORCH_NO_CUDA_MEMORY_CACHING=1) it records nothing, and its cudaMalloc calls are then only in the capture.
  std::vector<int64_t> recorded;
  for (const DeviceTrace& d : pytorch.devices)
    if (d.count() > 0) recorded.push_back(d.device);
  for (const Segment& seg : pytorch.segments) recorded.push_back(seg.device);
  auto pytorchs = [&](StackId st, int64_t dev) {
    return owners.owner(st) == Owner::kPyTorch && std::find(recorded.begin(), recorded.end(), dev) != recorded.end();
  };
  const bool timed = has_times(c);
  const std::vector<int64_t> device = device_of_rows(c);
  // A driver OOM of PyTorch's own cudaMalloc is in PyTorch's trace: other events also go by their stack.
  auto keep_row = [&](uint32_t row) {
    if (pytorchs(c.events.stack[row], device[row])) return false;
    const Action a = c.events.action[row];
    if (is_allocation(a)) return !record.called(device[row], c.events.addr[row], c.events.size[row], c.events.time_us[row], timed);
    if (a == Action::kOom) return !record.ran_out(device[row], c.events.size[row], c.events.time_us[row], timed);
    return true;
  };
  auto keep_segment = [&](const Segment& seg) {
    return !pytorchs(segment_stack(c, seg), seg.device) && !record.holds(seg.device, seg.address, seg.total_size);
  };
  keep_allocations(c, keep_row, keep_segment, &out);
  return out;
}

Status same_process(const Snapshot& c, const Snapshot& pt) {
  // (plain variables: clang 14, the wasm build's, cannot capture structured bindings in a lambda)
  const std::pair<int64_t, int64_t> cr = time_range(c), pr = time_range(pt);
  const int64_t c0 = cr.first, c1 = cr.second, p0 = pr.first, p1 = pr.second;
  const PyTorchRecord record(pt);
  auto apart = [&](const char* why) {
    return Error{"the two files do not overlap in time (the capture's events run from " + std::to_string(c0) + " to " +
                 std::to_string(c1) + " us, PyTorch's from " + std::to_string(p0) + " to " + std::to_string(p1) +
                 ")" + why + ": they come from different runs or processes"};
  };
  // (within one call's stamps of each other: PyTorch stamps its cudaMalloc after the capture does)
  if (c0 <= c1 && p0 <= p1 && p1 < c0 - kSameCallUs) return apart("");
  if (c0 <= c1 && p0 <= p1 && p0 > c1 + kSameCallUs) {
    // A long job: PyTorch's trace ring keeps only its newest entries, long after the capture's last cudaMalloc. One
    // process only if PyTorch reserved nothing in that time (the capture sees each of its cudaMalloc calls) and
    // every segment it holds is one the capture holds.
    if (record.calls() > 0) return apart(", and PyTorch's trace reserves memory the capture never saw");
    if (record.held() == 0) return apart("");
    std::vector<std::pair<int64_t, uint64_t>> starts;  // the capture's live segments (an expandable one: its maps)
    for (const Segment& cs : c.segments) starts.emplace_back(cs.device, cs.address);
    std::sort(starts.begin(), starts.end());
    for (const Segment& seg : pt.segments) {
      auto it = std::lower_bound(starts.begin(), starts.end(), std::make_pair(seg.device, seg.address));
      if (it == starts.end() || it->first != seg.device || it->second - seg.address >= seg.total_size)
        return apart(", and PyTorch holds a segment the capture does not");
    }
    return {};
  }
  if (record.calls() == 0 && record.held() == 0) return {};
  // PyTorch's memory as the capture saw it: each allocation by device, address and size.
  const bool timed = has_times(c);
  const std::vector<int64_t> device = device_of_rows(c);
  for (uint64_t row = 0; row < c.events.size_rows(); ++row) {
    if (!is_allocation(c.events.action[row]) || device[row] < 0) continue;
    if (record.called(device[row], c.events.addr[row], c.events.size[row], c.events.time_us[row], timed) ||
        record.holds(device[row], c.events.addr[row], c.events.size[row]))
      return {};
  }
  for (const Segment& seg : c.segments)
    if (record.holds(seg.device, seg.address, seg.total_size)) return {};
  return Error{"none of the device memory PyTorch's snapshot reserved (" + std::to_string(record.calls()) +
               " segment allocation(s) in its trace, " + std::to_string(record.held()) +
               " segment(s) held) is among the capture's allocations: the two files come from different processes "
               "(another run, or another rank)"};
}

namespace {

// PyTorch's pickle loaded once (the compact model, not a tree of its values) and checked to be a PyTorch snapshot
// that can take one more key, with how many memo slots it used: the appended part memoizes from there, so no slot
// is written twice (Python's and MemoryViz's unpicklers would accept it; a pickle checker would not).
Result<Snapshot> load_pytorch_side(std::span<const uint8_t> pytorch_pickle, LoadOptions::PickleFacts* facts) {
  LoadOptions o;
  o.facts = facts;
  auto pt = load_snapshot(pytorch_pickle, o);
  if (!pt.ok()) return Error{"PyTorch's snapshot: " + pt.error().message, pt.error().offset};
  if (is_capture(pt.value()))
    return Error{"this is a capture's snapshot, not PyTorch's (torch.cuda.memory._dump_snapshot)", 0};
  if (pt.value().outside) return Error{"this snapshot is already merged (it has 'allocscope_outside')", 0};
  // An optimizer state or any other dict loads (unknown keys never stop a load), but is not PyTorch's snapshot.
  if (facts->root_is_dict && !pt.value().has_device_traces && pt.value().segments.empty())
    return Error{"PyTorch's snapshot has neither 'segments' nor 'device_traces': it is not a memory snapshot "
                 "(torch.cuda.memory._dump_snapshot)", 0};
  if (!facts->root_is_dict)
    return Error{"PyTorch's snapshot is a bare list of segments (PyTorch 2.0); only a dict can carry the outside "
                 "memory", 0};
  // The loader stops at STOP, as Python does, and the key is appended before it; bytes after it were refused,
  // with the file's end as their offset (a known gap), though no reader ever sees them.
  if (facts->pickle_end == 0 || facts->pickle_end > pytorch_pickle.size() ||
      pytorch_pickle[facts->pickle_end - 1] != '.')
    return Error{"PyTorch's snapshot does not end with the pickle STOP opcode", facts->pickle_end};
  if (facts->memo_slots > UINT32_MAX / 2)
    return Error{"PyTorch's snapshot uses more memo slots than a pickle can append to", pytorch_pickle.size()};
  return pt;
}

// PyTorch's bytes with `allocscope_outside` appended before STOP, checked to load back.
Result<std::vector<uint8_t>> append_outside(std::span<const uint8_t> pytorch_pickle,
                                            const LoadOptions::PickleFacts& facts, const Snapshot& outside) {
  pickle::Writer w(pickle::Writer::Fragment{static_cast<uint32_t>(facts.memo_slots)});
  w.key("allocscope_outside");
  const std::vector<uint8_t> value = write_snapshot_value(outside, &w);
  std::vector<uint8_t> out;
  const size_t stop = static_cast<size_t>(facts.pickle_end - 1);  // checked by load_pytorch_side
  out.reserve(stop + value.size() + 3);
  // Before STOP the unpickler's stack holds the top-level dict: key, value, SETITEM sets one more item on it.
  out.insert(out.end(), pytorch_pickle.begin(), pytorch_pickle.begin() + static_cast<std::ptrdiff_t>(stop));
  out.insert(out.end(), value.begin(), value.end());
  out.push_back('s');  // SETITEM
  out.push_back('.');  // STOP
  auto check = load_snapshot(out);
  if (!check.ok()) return Error{"the merged snapshot does not load back: " + check.error().describe()};
  if (!check.value().outside) return Error{"the merged snapshot lost its outside part"};
  return out;
}

}  // namespace

Result<Merged> merge_capture(std::span<const uint8_t> pytorch_pickle, const Snapshot& capture) {
  if (!is_capture(capture)) return Error{"the capture file was not written by allocscope's capture"};
  LoadOptions::PickleFacts facts;
  auto pt = load_pytorch_side(pytorch_pickle, &facts);  // says so when the two are swapped, or already merged
  if (!pt.ok()) return pt.error();
  ALLOCSCOPE_RETURN_IF_ERROR(same_process(capture, pt.value()));
  const Snapshot outside = outside_of_pytorch(capture, pt.value());
  Merged m;
  m.outside_events = outside.events.size_rows();
  m.outside_segments = outside.segments.size();
  m.after_stop = pytorch_pickle.size() - facts.pickle_end;
  auto bytes = append_outside(pytorch_pickle, facts, outside);
  if (!bytes.ok()) return bytes.error();
  m.bytes = std::move(bytes).value();
  return m;
}

Result<std::vector<uint8_t>> merge_outside(std::span<const uint8_t> pytorch_pickle, const Snapshot& outside) {
  LoadOptions::PickleFacts facts;
  auto pt = load_pytorch_side(pytorch_pickle, &facts);
  if (!pt.ok()) return pt.error();
  return append_outside(pytorch_pickle, facts, outside);
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
  for (size_t step = 0; step < lt_.total.size(); ++step)
    if (lt_.total[step] > peak_) peak_ = lt_.total[step], peak_time_ = step ? time_[step - 1] : 0;
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
  std::unordered_map<FrameId, uint32_t> owners;
  for (uint32_t i = 0; i < lt_.count(); ++i) {
    if (!lt_.alive_at(i, step)) continue;
    r.bytes += lt_.size[i];
    if (!top_sites) continue;
    const FrameId site = ff_.site(lt_.stack[i]);
    sites[site] += lt_.size[i];
    owners[site] |= 1u << static_cast<int>(owners_.owner(lt_.stack[i]));
  }
  r.sites.assign(sites.begin(), sites.end());
  std::sort(r.sites.begin(), r.sites.end(),
            [](const auto& a, const auto& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
  if (r.sites.size() > top_sites) r.sites.resize(top_sites);
  for (const auto& [site, bytes] : r.sites) r.site_owners.push_back(owners[site]);
  return r;
}

std::string owner_labels(uint32_t mask) {
  std::string out;
  for (int o = 0; o < kOwnerCount; ++o)
    if (mask & (1u << o)) out += (out.empty() ? "" : ", ") + std::string(owner_label(static_cast<Owner>(o)));
  return out;
}

std::vector<std::string> owner_names(uint32_t mask) {
  std::vector<std::string> out;
  for (int o = 0; o < kOwnerCount; ++o)
    if (mask & (1u << o)) out.emplace_back(owner_name(static_cast<Owner>(o)));
  return out;
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
