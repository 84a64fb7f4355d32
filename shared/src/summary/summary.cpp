// The summary: per-device headline numbers from the other analyses plus every warning worth a user's attention.
#include "allocscope/summary.h"
#include "allocscope/threads.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>

#include "allocscope/categories.h"
#include "allocscope/iterations.h"
#include "allocscope/leaks.h"
#include "allocscope/memviz.h"
#include "allocscope/peak.h"
#include "allocscope/segment_timeline.h"
#include "util/parallel.h"

namespace allocscope {

namespace {

std::string dev(int64_t d) { return "device " + std::to_string(d) + ": "; }

// Many findings repeat per event; users need the count and one example, not thousands of lines.
void add_grouped(const std::vector<std::string>& in, const std::string& prefix, std::vector<std::string>* out) {
  if (in.empty()) return;
  if (in.size() == 1) {
    out->push_back(prefix + in[0]);
  } else {
    out->push_back(prefix + std::to_string(in.size()) + " findings, e.g. " + in[0]);
  }
}

}  // namespace

namespace {

// `timelines`: each device's segment timeline, in the lifetimes' order, or null to build them here.
Summary summarize_with(const Snapshot& s, const Lifetimes& lifetimes, const std::vector<SegmentTimeline>* timelines,
                       const FrameFilter& ff, uint32_t top_sites, const CategoryOptions& categories) {
  const SingleThreaded small(s.events.size_rows() < detail::kEventsWorthAThread);  // a thread would cost more
  Summary sum;
  sum.segments = s.segments.size();
  sum.blocks = s.blocks.size();
  sum.events = s.events.size_rows();
  sum.source_bytes = s.source_bytes;
  // Devices are independent: each one's analyses run on a core of their own (detail::parallel_for), and their
  // warnings are gathered in device order afterwards, so the answer does not depend on the threads.
  struct PerDevice {
    DeviceSummary d;
    std::vector<std::string> leak_warnings, other;
  };
  std::vector<PerDevice> per(lifetimes.devices.size());
  // A core is spare when there are fewer devices than cores: then the file-wide checks, and pairs of one device's
  // analyses, run beside each other (detail::both; in order on one thread, the same answer).
  const bool spare = detail::threads_for(per.size() + 1) > per.size();
  auto one_device = [&](size_t k) {
    const DeviceLifetimes& lt = lifetimes.devices[k];
    DeviceSummary& d = per[k].d;
    std::vector<std::string>& leak_warnings = per[k].leak_warnings;
    std::vector<std::string>& other = per[k].other;
    d.device = lt.device;
    d.events = lt.event_count;
    d.windowed = lt.windowed();
    d.step_offset = lt.step_offset();
    d.first_step = lt.first_step;
    d.last_step = lt.window_last() + lt.step_offset();
    d.file_events = lt.file_events;
    if (lt.windowed() && lt.window_last() > lt.window_first()) {
      // A window's events and span are its own, not those of the rows kept from before and after it.
      d.events = lt.window_last() - lt.window_first();
      d.first_us = s.events.time_us[lt.event_begin + lt.window_first()];
      d.last_us = s.events.time_us[lt.event_begin + lt.window_last() - 1];
    } else if (lt.event_count) {
      d.first_us = s.events.time_us[lt.event_begin];
      d.last_us = s.events.time_us[lt.event_begin + lt.event_count - 1];
    }
    d.timed = lt.timed(s);
    d.allocations = lt.count();
    for (uint32_t i = 0; i < lt.count(); ++i) d.frees_without_alloc += lt.origin[i] == LifetimeOrigin::kFreedOnly;
    for (uint32_t i = 0; i < lt.event_count; ++i) d.ooms += s.events.action[lt.event_begin + i] == Action::kOom;

    // The segment timeline and the categories do not need each other, nor do the peak and the leaks: with a core
    // to spare (fewer devices than cores, the usual one-GPU rank), each pair runs at once.
    std::optional<SegmentTimeline> st_slot;
    std::optional<Iterations> it_slot;
    std::optional<Result<Categories>> cats_slot;
    detail::both(
        spare && !timelines, [&] {
          if (!timelines) st_slot.emplace(build_segment_timeline(s, lt.device));
        },
        [&] {
          it_slot.emplace(detect_iterations(s, lt));
          cats_slot.emplace(categorize(s, lt, *it_slot, ff, categories));  // rules were checked when parsed
        });
    const SegmentTimeline& st = timelines ? (*timelines)[k] : *st_slot;
    const Iterations& it = *it_slot;
    d.iterations = static_cast<uint32_t>(it.boundary.size());
    const Categories* c = cats_slot->ok() ? &cats_slot->value() : nullptr;
    PeakOptions po;
    po.top = top_sites;
    std::optional<Peak> peak_slot;
    std::optional<LeakReport> leaks_slot;
    detail::both(
        spare, [&] { peak_slot.emplace(find_peak(s, lt, &st, ff, c, po)); },
        [&] {
          if (c) leaks_slot.emplace(find_leaks(s, lt, it, *c, ff));
        });
    const Peak& p = *peak_slot;
    d.peak_allocated = p.allocated_bytes;
    d.peak_allocated_step = p.allocated_step;
    d.peak_reserved = p.reserved_bytes;
    d.peak_reserved_step = p.reserved_step;
    d.top_site = p.site;
    d.top_site_bytes = p.site_bytes;
    d.owners_at_peak = p.owners;
    d.outside_at_peak = p.outside.bytes;
    d.outside_sites_at_peak = p.outside.sites;
    d.outside_site_owners = p.outside.site_owners;
    d.outside_peak = p.outside_peak;

    uint64_t free_bytes = 0;
    for (const Segment& seg : s.segments) {
      if (seg.device != lt.device) continue;
      d.final_reserved += seg.total_size;
      for (const Block& b : s.blocks_of(seg)) {
        if (b.state == BlockState::kInactive) {
          free_bytes += b.size;
          d.final_largest_free = std::max(d.final_largest_free, b.size);
          if (seg.pool_id[0] != 0 || seg.pool_id[1] != 0) d.final_free_private += b.size;
          else d.final_largest_free_shared = std::max(d.final_largest_free_shared, b.size);
        } else if (b.state == BlockState::kActivePendingFree) {
          // Freed by the program but still used by another stream's queued work: PyTorch's allocator already took
          // it out of memory_allocated() (and segments' allocated_size), and reuses it once those events complete.
          d.final_pending_free += b.size;
        } else {
          d.final_allocated += b.size;  // an unknown state counts as allocated, as it did before states were read
        }
      }
    }
    d.fragmentation = free_bytes ? 1.0 - static_cast<double>(d.final_largest_free) / static_cast<double>(free_bytes) : 0;

    if (leaks_slot) {
      const LeakReport& lr = *leaks_slot;
      if (lr.forward_only) d.forward_repeats = std::exchange(d.iterations, 0);
      if (lr.setup_only) d.setup_repeats = std::exchange(d.iterations, 0);
      d.leak_suspected = lr.leak_suspected();
      if (d.leak_suspected) {
        const LeakGroup& g = lr.growing.front();
        d.leak_site = FrameFilter::site_text(s, g.site);
        leak_warnings.push_back(dev(lt.device) + "leak suspected: " + d.leak_site + " keeps " +
                                std::to_string(g.allocations) + " more allocation(s) alive over " +
                                std::to_string(it.boundary.size()) + " iterations (+" +
                                memviz::format_size(g.bytes_per_iteration) + " per iteration; see `allocscope leaks`)");
      }
      if (lr.pool_growth_suspected()) {
        const PoolGrowth& g = lr.pools_growing.front();
        leak_warnings.push_back(dev(lt.device) + "pool growth: " + std::string(owner_label(g.owner)) +
                                " reserves +" + memviz::format_size(g.bytes_per_iteration) +
                                " per iteration after warm-up" +
                                (g.sites.empty() ? std::string() : ", most at " + FrameFilter::site_text(s, g.sites.front().site)) +
                                " (a capture sees the pool, not its tensors: a leak of tensors looks like this; see "
                                "`allocscope leaks`)");
      }
      for (const LeakGroup& g : lr.held) {
        leak_warnings.push_back(dev(lt.device) + "gradients held across optimizer steps: " +
                                std::to_string(g.allocations) + " allocation(s), " +
                                memviz::format_size(g.bytes_per_iteration) + " from " +
                                (g.site == kNoFrame ? std::string("the backward pass (no frames)")
                                                    : FrameFilter::site_text(s, g.site)) +
                                " (never freed between steps: zero_grad() missing, or called with set_to_none=False; "
                                "set_to_none=True, the default since PyTorch 2.0, frees them before the next forward)");
      }
    }
    // (The ring buffer's warning comes first in `other`; it is added below, once the file checks have counted the
    // repeated frees it must leave out.)
    // Live allocations always sit inside reserved segments, so the allocated peak can never pass the reserved one
    // (both replayed from the same trace and segments); when it does, the two parts of the file disagree.
    if (d.peak_reserved > 0 && d.peak_allocated > d.peak_reserved) {
      other.push_back(dev(lt.device) + "the allocated peak (" + memviz::format_size(d.peak_allocated) +
                      ") is above the reserved peak (" + memviz::format_size(d.peak_reserved) +
                      "): the trace and the segments disagree, so neither peak is what the allocator held");
    }
    if (d.ooms) other.push_back(dev(lt.device) + std::to_string(d.ooms) + " out-of-memory event(s) (see `allocscope oom`)");
    add_grouped(lt.warnings, dev(lt.device) + "replay: ", &other);
    add_grouped(st.warnings, dev(lt.device) + "segments: ", &other);
  };
  std::vector<std::string> checks;
  std::vector<std::pair<int64_t, uint64_t>> repeated;
  detail::both(
      spare, [&] { checks = consistency_warnings(s, lifetimes, &repeated); },
      [&] { detail::parallel_for(per.size(), one_device); });
  // The ring buffer explains a free without alloc only when it is the first event at its address (its alloc fell
  // off the start). One after the address's last event was a free is a repeated free, which the checks report: a
  // replay finds exactly those frees without a live alloc.
  // PyTorch 2.12+ says whether its ring buffer overflowed, and its size (allocator_settings'
  // trace_alloc_overflowed and trace_alloc_max_entries): read, where older files leave it to be inferred below.
  int overflowed = -1;  // -1: the file does not say
  int64_t max_entries = 0;
  for (const Setting& st : s.allocator_settings) {
    if (st.key == "trace_alloc_overflowed" && st.kind == Setting::Kind::kBool) overflowed = st.i ? 1 : 0;
    if (st.key == "trace_alloc_max_entries" && st.kind == Setting::Kind::kInt) max_entries = st.i;
  }
  for (PerDevice& p : per) {
    uint64_t wrapped = p.d.frees_without_alloc;
    for (const auto& [device, n] : repeated)
      if (device == p.d.device) wrapped -= std::min(wrapped, n);
    if (overflowed == 1 && p.d.events) {
      p.other.insert(p.other.begin(),
                     dev(p.d.device) + "the ring buffer overflowed (the file says so: trace_alloc_overflowed" +
                         (max_entries > 0 ? ", max_entries=" + std::to_string(max_entries) : std::string()) +
                         "): the oldest events are missing" +
                         (wrapped ? ", and " + std::to_string(wrapped) +
                                        " allocations whose alloc fell off the start are drawn from the start"
                                  : std::string()) +
                         "; a larger max_entries keeps more");
      continue;
    }
    if (overflowed == 0) {  // not wrapped: those allocations predate recording
      if (wrapped)
        p.other.insert(p.other.begin(),
                       dev(p.d.device) + std::to_string(wrapped) +
                           " frees without allocs: those allocations were made before recording started (the "
                           "ring buffer did not overflow, the file says); they are drawn from the start");
      continue;
    }
    // Once PyTorch's ring buffer wraps it holds exactly max_entries events, and people pick round numbers
    // (100_000, 1_000_000); a trace of any other length never filled its buffer, so those allocations were made
    // before recording started (the usual "record after warm-up": an audit found pt26_cs336_train's 27,358
    // events, with max_entries=1000000, told to raise max_entries).
    // (Of a loaded window, the file's length: a window of 1,000,000 steps is not a ring buffer's.)
    const uint64_t n = p.d.windowed ? p.d.file_events : p.d.events;
    if (wrapped && n >= 1000 && n % 1000 == 0)
      p.other.insert(p.other.begin(),
                     dev(p.d.device) + std::to_string(wrapped) + " frees without allocs: the trace holds exactly " +
                         std::to_string(n) + " events, so the ring buffer most likely wrapped (max_entries=" +
                         std::to_string(n) + "): the oldest events are missing and those allocations are drawn "
                         "from the start");
    else if (wrapped)
      p.other.insert(p.other.begin(),
                     dev(p.d.device) + std::to_string(wrapped) +
                         " frees without allocs: those allocations were made before recording started (or before "
                         "the oldest event a wrapped ring buffer kept); they are drawn from the start");
  }
  std::vector<std::string> leak_warnings, other;
  for (PerDevice& p : per) {
    sum.devices.push_back(std::move(p.d));
    for (std::string& w : p.leak_warnings) leak_warnings.push_back(std::move(w));
    for (std::string& w : p.other) other.push_back(std::move(w));
  }
  // OOMs and leaks first: they are why people open a snapshot.
  std::vector<std::string> ooms_first;
  for (auto& w : other)
    if (w.find("out-of-memory") != std::string::npos) ooms_first.push_back(w);
  sum.warnings = ooms_first;
  for (auto& w : leak_warnings) sum.warnings.push_back(w);
  for (auto& w : other)
    if (w.find("out-of-memory") == std::string::npos) sum.warnings.push_back(w);
  for (const std::string& w : s.warnings) sum.warnings.push_back("file: " + w);
  for (std::string& w : checks) sum.warnings.push_back(std::move(w));
  return sum;
}

}  // namespace

Summary summarize(const Snapshot& s, const Lifetimes& lifetimes, const FrameFilter& ff, uint32_t top_sites,
                  const CategoryOptions& categories) {
  return summarize_with(s, lifetimes, nullptr, ff, top_sites, categories);
}

Summary summarize(const Snapshot& s, const FrameFilter& ff, uint32_t top_sites, const CategoryOptions& categories) {
  const SingleThreaded small(s.events.size_rows() < detail::kEventsWorthAThread);  // a thread would cost more
  // The timelines need only the snapshot, so they go to the worker: the lifetimes stay on this thread, whose heap has
  // the parse's freed memory for their columns to reuse.
  const std::vector<int64_t> devices = lifetime_devices(s);
  std::vector<SegmentTimeline> timelines(devices.size());
  Lifetimes lifetimes;
  detail::both(
      true, [&] {
        for (size_t k = 0; k < devices.size(); ++k) timelines[k] = build_segment_timeline(s, devices[k]);
      },
      [&] { lifetimes = build_lifetimes(s); });
  return summarize_with(s, lifetimes, &timelines, ff, top_sites, categories);
}

}  // namespace allocscope
