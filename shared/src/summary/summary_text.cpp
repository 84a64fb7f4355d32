// Human text for the summary: warnings that need action first, then per-device numbers.
#include <algorithm>

#include "allocscope/lifetimes.h"
#include "allocscope/outside.h"
#include "allocscope/summary.h"
#include "analysis/frame_filter_text.h"

namespace allocscope {

using namespace text_detail;

std::string to_text(const Snapshot& s, const Summary& sum) {
  std::string o;
  o += std::to_string(sum.devices.size()) + " device(s), " + std::to_string(sum.events) + " events, " +
       std::to_string(sum.segments) + " segments, " + std::to_string(sum.blocks) + " blocks\n";
  // An empty snapshot is a real outcome (pt26_empty): zeros alone read as a broken file or a broken tool.
  if (sum.devices.empty())
    o += "\nIt holds no allocations: its device traces are empty and it has no segments (taken before anything was "
         "allocated, or after everything was freed and torch.cuda.empty_cache() gave the cache back). To see memory "
         "over time, call torch.cuda.memory._record_memory_history() before the work and dump the snapshot while "
         "memory is in use.\n";
  for (const DeviceSummary& d : sum.devices) {
    // PyTorch 2.0's and 2.1's files record no times: a span of 0 would read as measured.
    o += "\ndevice " + std::to_string(d.device) + ": " + std::to_string(d.events) + " events " +
         (d.events > 0 && !d.timed ? std::string("(no times recorded)")
                                                            : "over " + seconds(d.last_us - d.first_us)) +
         ", " + std::to_string(d.allocations) + " allocations";
    if (d.iterations) o += ", " + std::to_string(d.iterations) + (d.iterations == 1 ? " iteration" : " iterations");
    if (d.forward_repeats) o += ", " + std::to_string(d.forward_repeats) + " repeats inside module forwards (not counted as iterations)";
    if (d.setup_repeats) o += ", " + std::to_string(d.setup_repeats) + " repeats while the model's weights were built or moved (not counted as iterations)";
    o += "\n";
    if (d.windowed)
      o += "  loaded a window  steps " + std::to_string(d.first_step) + ".." + std::to_string(d.last_step) +
           " of the file's " + std::to_string(d.file_events) +
           " events (peaks are the window's)\n";
    auto step = [&d](uint32_t k) {
      return "at step " + std::to_string(d.step_offset + k) +
             (k > 0 || d.windowed ? "" : d.events ? " (before the first event)" : " (no trace: the state the snapshot holds)");
    };
    o += "  peak allocated   " + rpad(size(d.peak_allocated), 10) + "  " + step(d.peak_allocated_step) + "\n";
    if (!d.reserved_known())
      o += "  peak reserved    " + rpad("unknown", 10) + "  (the file holds no segments for this device)\n";
    else
      o += "  peak reserved    " + rpad(size(d.peak_reserved), 10) + "  " + step(d.peak_reserved_step) + "\n";
    o += "  at the end       " + rpad(size(d.final_reserved), 10) + "  reserved, " + size(d.final_allocated) + " allocated";
    if (d.final_pending_free) o += " (+" + size(d.final_pending_free) + " freed, waiting for other streams)";
    o += ", largest free block " + size(d.final_largest_free) + " (fragmentation " + percent(d.fragmentation) + ")\n";
    if (d.final_free_private)
      o += "                   (" + size(d.final_free_private) + " of the free memory is in private pools, a CUDA "
           "graph's or a MemPool's, for their own allocations only; the largest free block outside them is " +
           size(d.final_largest_free_shared) + ")\n";
    if (d.final_allocated > d.peak_allocated)
      o += "                   (the peak counts requested bytes, as PyTorch's timeline; the end, the allocator's rounded "
           "blocks)\n";
    if (!d.owners_at_peak.empty()) {
      o += s.outside ? "  device memory at the peak by owner (PyTorch's reserved, and the capture's outside it):\n"
                     : "  reserved at the peak by owner:\n";
      for (const auto& [owner, bytes] : d.owners_at_peak)
        o += "    " + rpad(size(bytes), 10) + "  " + std::string(owner_label(owner)) + "\n";
    }
    if (s.outside) {
      o += "  outside PyTorch " + rpad(size(d.outside_at_peak), 10) + "  at the peak, " + size(d.outside_peak) +
           " at most\n";
      for (size_t k = 0; k < d.outside_sites_at_peak.size(); ++k) {
        const auto& [site, bytes] = d.outside_sites_at_peak[k];
        const uint32_t owners = k < d.outside_site_owners.size() ? d.outside_site_owners[k] : 0;
        o += "    " + rpad(size(bytes), 10) + "  " + FrameFilter::site_text(*s.outside, site) +
             (owners ? " (" + owner_labels(owners) + ")" : "") + "\n";
      }
    }
    if (!d.top_site.empty()) {
      o += "  top sites at the peak:\n";
      for (size_t k = 0; k < d.top_site.size(); ++k)
        o += "    " + rpad(size(d.top_site_bytes[k]), 10) + "  " + FrameFilter::site_text(s, d.top_site[k]) + "\n";
    }
  }
  // Pinned host memory (PyTorch 2.14's record_pinned_host_memory): its own line, not a device's, since it is not GPU
  // memory and no device's numbers include it.
  if (s.host) {
    uint64_t reserved = 0, allocated = 0;
    for (const Segment& seg : s.host->segments) {
      reserved += seg.total_size;
      for (const Block& b : s.host->blocks_of(seg))
        if (b.state == BlockState::kActiveAllocated) allocated += b.size;
    }
    const DeviceLifetimes lt = build_device_lifetimes(*s.host, 0);
    uint64_t peak = 0;
    for (uint64_t t : lt.total) peak = std::max(peak, t);
    o += "\npinned host memory: " + std::to_string(s.host->segments.size()) + " host segment(s), " + size(reserved) +
         " reserved and " + size(allocated) + " allocated at the snapshot; peak allocated " + size(peak) + " over " +
         std::to_string(lt.event_count) + " host trace events\n";
  }
  if (!sum.warnings.empty()) {
    o += "\nwarnings:\n";
    for (const std::string& w : sum.warnings) o += "  - " + w + "\n";
  } else {
    o += "\nno warnings\n";
  }
  return o;
}

}  // namespace allocscope
