// Out-of-memory explanations: at each `oom` event, the request against what the device and the allocator had, and
// what was alive when it failed.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

#include "allocscope/gpu_sizes.h"
#include "allocscope/lifetimes.h"
#include "allocscope/owners.h"
#include "allocscope/snapshot.h"

namespace allocscope {

// Why the request failed, decided in this order (the first that holds):
enum class OomCause : uint8_t {
  kRequestTooLarge,  // the request alone is larger than the GPU: nothing anyone frees can make it fit
  kHeldOutside,      // larger than all PyTorch holds plus what the driver has free: the rest of the GPU is held
                     // outside this allocator (another process, NCCL, CuPy, JAX, a CUDA context), so freeing
                     // PyTorch's tensors cannot help
  kAllocatorCap,     // the driver reported enough free memory, yet the allocator refused: a per-process cap
                     // (set_per_process_memory_fraction) or, rarely, the driver's own fragmentation
  kFragmentation,    // enough free bytes (cached in segments plus the driver's), but no block large enough
  kLiveTensors,      // live tensors hold the memory: fewer or smaller live tensors make it fit
};
std::string_view oom_cause_name(OomCause c);  // "request_too_large", "held_outside", ...

struct OomOptions {
  uint32_t top = 10;                  // bounds top_rows
  std::optional<GpuCapacity> gpu;     // the GPU's size when the user knows it; inferred otherwise
  // Each OOM rebuilds the allocator's state: a device with more OOM events than this has its first and last halves
  // of them explained (an audit: 40,000 OOMs beside 40,000 live segments, a 461 KB file, took 44 s). 0: all.
  uint32_t max_per_device = 100;
};

struct OomReport {
  int64_t device = 0;
  uint32_t event = 0;          // device-local index of the `oom` entry
  uint32_t ooms_on_device = 0;  // every oom event of the device, explained here or not (OomOptions::max_per_device)
  int64_t time_us = 0;
  uint64_t requested = 0;      // the failed request (the entry's size)
  uint64_t device_free = 0;    // what the driver reported free (stored in the addr column for oom rows)
  // The allocator just before the failure (the state after the previous event).
  uint64_t reserved = 0;       // segments' bytes
  uint64_t allocated = 0;      // active blocks' bytes (allocator block sizes)
  uint64_t requested_live = 0; // the live requests (what the program asked for)
  uint64_t cached_free = 0;    // reserved - allocated - pending_free: free inside segments
  uint64_t pending_free = 0;   // blocks freed while another stream's queued work still used them: neither allocated
                               // nor free until that work completes
  uint64_t largest_free_block = 0;  // the largest gap inside one segment
  // A cached block serves only the stream it was made on, and the pool of its size (requests up to 1 MiB take 2 MiB
  // small-pool segments, larger ones the large pool): what of the free bytes this request could have used.
  int64_t stream = 0;                      // the failed request's stream
  uint64_t usable_free = 0;                // free bytes in segments of its stream and pool
  uint64_t usable_largest_free_block = 0;  // the largest of those gaps
  uint64_t free_other_streams = 0;         // free bytes in segments of other streams
  uint64_t largest_free_other_streams = 0;  // the largest of those gaps in the request's pool
  uint64_t largest_free_other_pool = 0;     // the largest gap in the other pool, on any stream
  // Private memory pools (a CUDA graph's, or torch.cuda.MemPool's: a segment's pool id other than (0, 0)) serve
  // only allocations made inside their capture or use_mem_pool, and PyTorch does not release a live graph's pool
  // to make room. The request's own pool is read from where the allocation before it on its stream landed.
  bool request_in_private_pool = false;
  uint64_t free_other_mempools = 0;         // free bytes in segments of a memory pool other than the request's
  uint64_t largest_free_other_mempool = 0;  // the largest of those gaps
  uint32_t live_allocations = 0;  // blocks allocated at the OOM, pending frees left out
  uint64_t driver_needed = 0;  // the new segment no cached block could spare it from (segment_size of the request)
  // The cause is fragmentation: memory was free (cached plus the driver's) but in no piece this request could use.
  bool fragmentation = false;
  OomCause cause = OomCause::kLiveTensors;
  bool cause_sure = true;        // false when the cause hangs on the GPU's size and that size was inferred
  GpuCapacity gpu;               // total_bytes 0 when even the largest GPU we know is smaller than the numbers
  bool gpu_given_too_small = false;  // the GPU given is smaller than reserved + device_free: set aside, inferred
  uint64_t held_outside = 0;     // gpu total - reserved - device_free: a lower bound when the GPU size is inferred
  // Merged snapshots (outside.h): what the capture saw allocated outside PyTorch's allocator at the OOM, by owner.
  bool has_outside = false;
  uint64_t captured_outside = 0;
  std::vector<std::pair<Owner, uint64_t>> outside_by_owner;
  bool expandable_segments = false;  // the allocator setting, when the file records it
  std::string advice;            // what to do about this cause, in one or two sentences
  // Largest live allocations (lifetimes rows), largest first.
  std::vector<uint32_t> top_rows;
};

// One report per `oom` event, in trace order.
std::vector<OomReport> analyze_ooms(const Snapshot& s, const Lifetimes& lifetimes, const OomOptions& options = {});

std::string to_json(const Snapshot& s, const Lifetimes& lifetimes, const std::vector<OomReport>& r);
std::string to_text(const Snapshot& s, const Lifetimes& lifetimes, const std::vector<OomReport>& r);

}  // namespace allocscope
