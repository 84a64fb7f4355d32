// The one-screen answer: devices, events, time span, peaks, fragmentation, top sites, OOMs, leaks and warnings,
// including inconsistent content found in the file (reported, never fatal).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "allocscope/categories.h"
#include "allocscope/frame_filter.h"
#include "allocscope/lifetimes.h"
#include "allocscope/owners.h"
#include "allocscope/snapshot.h"

namespace allocscope {

struct DeviceSummary {
  int64_t device = 0;
  uint32_t events = 0;
  int64_t first_us = 0, last_us = 0;
  bool timed = false;  // the trace records times (DeviceLifetimes::timed: PyTorch 2.0/2.1 write 0 everywhere)
  uint32_t allocations = 0;          // lifetimes rows
  uint32_t frees_without_alloc = 0;  // allocations the ring buffer cut (allocated before the window)
  // The highest total of live allocations over steps 0..n (step 0: before the first event), in requested bytes,
  // as PyTorch's Active Memory Timeline draws it. Its max_size leaves out step 0, so it is lower where memory is
  // highest before the first event (a trace that opens with frees of older allocations).
  uint64_t peak_allocated = 0;
  uint32_t peak_allocated_step = 0;
  uint64_t peak_reserved = 0;
  uint32_t peak_reserved_step = 0;
  // A window of the file was loaded (DeviceLifetimes::step_offset): the steps above are the loaded trace's, the
  // file's are step_offset more; the window is the file's steps first_step..last_step, of its file_events.
  int64_t step_offset = 0;
  uint64_t first_step = 0, last_step = 0;
  uint64_t file_events = 0;
  bool windowed = false;
  // Final state from the file's segments (ground truth), in the allocator's block sizes (rounded up): reserved;
  // allocated as PyTorch's memory_allocated() counts it (the segments' allocated_size); blocks freed but waiting
  // for another stream's work (PyTorch's active, not allocated, bytes); the largest free block.
  uint64_t final_reserved = 0;
  // No segments and no segment events for this device, yet allocations: what was reserved is unknown, not zero.
  bool reserved_known() const { return !(peak_reserved == 0 && peak_allocated > 0 && final_reserved == 0); }
  uint64_t final_allocated = 0;
  uint64_t final_pending_free = 0;
  uint64_t final_largest_free = 0;
  double fragmentation = 0;  // 1 - largest free block / free bytes in segments (0 = all free space in one block)
  // Free bytes in private memory pools (a CUDA graph's, a MemPool's: segment_pool_id not (0, 0)), which only their
  // own allocations can use, and the largest free block outside them. An audit: after an OOM asking for 4 GiB,
  // "largest free block 8.0GiB (fragmentation 0%)" was a CUDA graph's block no eager tensor could take.
  uint64_t final_free_private = 0;
  uint64_t final_largest_free_shared = 0;
  uint32_t iterations = 0;   // detected iteration boundaries
  // Guessed repeats that all run inside module forwards (LeakReport::forward_only): steps of a forward pass, or a
  // loop that only calls the model. They are not counted as iterations.
  uint32_t forward_repeats = 0;
  // Guessed repeats that all build or move the model's weights (LeakReport::setup_only): its layers, not iterations.
  uint32_t setup_repeats = 0;
  uint32_t ooms = 0;
  bool leak_suspected = false;
  std::string leak_site;     // the largest growing site when a leak is suspected
  // Snapshots from our capture only: the bytes alive at the peak by owner (PyTorch's pool, NCCL, ...), largest
  // first (there every allocation is a reservation, so allocated and reserved are the same bytes).
  std::vector<std::pair<Owner, uint64_t>> owners_at_peak;
  // Merged snapshots (outside.h): the capture's memory outside PyTorch's allocator at the allocated peak, its top
  // sites (FrameIds of Snapshot::outside), and its own highest total over the run.
  uint64_t outside_at_peak = 0;
  std::vector<std::pair<FrameId, uint64_t>> outside_sites_at_peak;
  std::vector<uint32_t> outside_site_owners;  // per site: its owners (OutsideAt::site_owners)
  uint64_t outside_peak = 0;
  // Top sites (deepest user frames) alive at the allocated peak.
  std::vector<FrameId> top_site;
  std::vector<uint64_t> top_site_bytes;
};

struct Summary {
  std::vector<DeviceSummary> devices;
  uint64_t segments = 0, blocks = 0, events = 0, source_bytes = 0;
  std::vector<std::string> warnings;  // human sentences, most important first
};

// Runs every analysis it needs (segment timelines, iterations, categories, leaks, peaks) on the given lifetimes.
// `categories`: user rules (categories.h), as `export --rule` applies them to every answer of the document.
Summary summarize(const Snapshot& s, const Lifetimes& lifetimes, const FrameFilter& ff, uint32_t top_sites = 5,
                  const CategoryOptions& categories = {});
// The same, building the lifetimes too, for callers that need nothing else of them: each device's segment timeline
// is built on the other core meanwhile (the lifetimes' first replay holds one core only).
Summary summarize(const Snapshot& s, const FrameFilter& ff, uint32_t top_sites = 5,
                  const CategoryOptions& categories = {});

// Consistency checks of the file itself (blocks outside their segment, frees of unknown addresses, time going
// backwards, negative sizes, segments freed twice ...): one sentence per kind of problem, with a count.
// `repeated_frees`, if given, gets each device's count of frees whose address's last event was a free. Those are
// counted from `lifetimes` (build_lifetimes of `s`); a device it lacks has its trace replayed instead.
std::vector<std::string> consistency_warnings(const Snapshot& s, const Lifetimes& lifetimes,
                                              std::vector<std::pair<int64_t, uint64_t>>* repeated_frees = nullptr);

std::string to_json(const Snapshot& s, const Summary& sum);
std::string to_text(const Snapshot& s, const Summary& sum);

}  // namespace allocscope
