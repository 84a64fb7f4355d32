// Out-of-memory explanations: at each `oom` event, the request against what the device and the allocator had, and
// what was alive when it failed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "allocscope/lifetimes.h"
#include "allocscope/snapshot.h"

namespace allocscope {

struct OomReport {
  int64_t device = 0;
  uint32_t event = 0;          // device-local index of the `oom` entry
  int64_t time_us = 0;
  uint64_t requested = 0;      // the failed request (the entry's size)
  uint64_t device_free = 0;    // what the driver reported free (stored in the addr column for oom rows)
  // The allocator just before the failure (the state after the previous event).
  uint64_t reserved = 0;       // segments' bytes
  uint64_t allocated = 0;      // active blocks' bytes (allocator block sizes)
  uint64_t requested_live = 0; // the live requests (what the program asked for)
  uint64_t cached_free = 0;    // reserved - allocated: free inside segments
  uint64_t largest_free_block = 0;  // the largest gap inside one segment
  uint32_t live_allocations = 0;
  // The request would have fit in the cached free bytes but no single free block was large enough.
  bool fragmentation = false;
  // Largest live allocations (lifetimes rows), largest first.
  std::vector<uint32_t> top_rows;
};

// One report per `oom` event, in trace order. `top` bounds top_rows.
std::vector<OomReport> analyze_ooms(const Snapshot& s, const Lifetimes& lifetimes, uint32_t top = 10);

std::string to_json(const Snapshot& s, const Lifetimes& lifetimes, const std::vector<OomReport>& r);
std::string to_text(const Snapshot& s, const Lifetimes& lifetimes, const std::vector<OomReport>& r);

}  // namespace allocscope
