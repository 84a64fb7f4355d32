// OOM analysis: the allocator state just before each `oom` event (from the checkpointed state index), its largest
// free block, and the largest live allocations.
#include "allocscope/oom.h"

#include <algorithm>
#include <iterator>
#include <memory>
#include <unordered_map>

#include "allocscope/allocator_state.h"
#include "allocscope/memviz.h"
#include "allocscope/outside.h"
#include "allocscope/segment_timeline.h"
#include "analysis/allocator_rules.h"

namespace allocscope {

std::string_view oom_cause_name(OomCause c) {
  switch (c) {
    case OomCause::kRequestTooLarge: return "request_too_large";
    case OomCause::kHeldOutside: return "held_outside";
    case OomCause::kAllocatorCap: return "allocator_cap";
    case OomCause::kFragmentation: return "fragmentation";
    case OomCause::kLiveTensors: return "live_tensors";
  }
  return "unknown";
}

namespace {

enum class Pool : uint8_t { kUnknown, kSmall, kLarge };

// The device's final segments by address, for what a snapshot records only there: each segment's memory pool (pool
// id) and size pool (segment_type). One sorted index per OOM device; both lookups once walked every segment of the
// file for every segment of the state.
class FinalSegments {
 public:
  using Mempool = std::pair<int64_t, int64_t>;
  FinalSegments(const Snapshot& s, int64_t device) {
    for (const Segment& seg : s.segments) {
      if (seg.device != device) continue;
      const std::string_view type = seg.segment_type ? s.str(seg.segment_type) : std::string_view();
      const Pool pool = type == "small" ? Pool::kSmall : type == "large" ? Pool::kLarge : Pool::kUnknown;
      ranges_.push_back({seg.address, seg.address + seg.total_size, pool, {seg.pool_id[0], seg.pool_id[1]}});
    }
    std::sort(ranges_.begin(), ranges_.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  }
  // The memory pool of the final segment holding `addr`; {0, 0}, the default pool, where none does (a segment
  // freed before the end was in no live graph's pool).
  Mempool mempool_at(uint64_t addr) const {
    auto it = std::upper_bound(ranges_.begin(), ranges_.end(), addr,
                               [](uint64_t a, const Range& r) { return a < r.begin; });
    if (it == ranges_.begin()) return {0, 0};
    --it;
    return addr < it->end ? it->mempool : Mempool{0, 0};
  }
  // The pool of an expandable segment's mapped range [addr, addr + size): the segment_type of a final segment that
  // overlaps it, if the file names one; else small when the range is not a whole number of 20 MiB pages (the large
  // pool maps only those); else unknown (a range unmapped before the end, in a file without segment_type).
  Pool expandable_pool(uint64_t addr, uint64_t size) const {
    auto it = std::upper_bound(ranges_.begin(), ranges_.end(), addr,
                               [](uint64_t a, const Range& r) { return a < r.begin; });
    if (it != ranges_.begin() && std::prev(it)->end > addr) --it;  // the one that starts before addr, if it reaches in
    for (; it != ranges_.end() && it->begin < addr + size; ++it)
      if (it->end > addr && it->pool != Pool::kUnknown) return it->pool;
    return size % detail::kLargeBuffer != 0 ? Pool::kSmall : Pool::kUnknown;
  }

 private:
  struct Range {
    uint64_t begin, end;
    Pool pool;
    Mempool mempool;
  };
  std::vector<Range> ranges_;
};

// Decides the cause from the numbers alone (see OomCause for the order) and says what to do about it.
void classify(OomReport& o, const std::optional<GpuCapacity>& given) {
  const uint64_t accounted = o.reserved + o.device_free;  // all PyTorch could free, plus what the driver has
  // A GPU smaller than what this OOM shows in use cannot be the one it ran on (a typo, another GPU's name): its
  // answers would be sure and wrong, so it is set aside for the inferred one, and the advice says so.
  o.gpu_given_too_small = given && given->total_bytes < accounted;
  const auto gpu = given && !o.gpu_given_too_small ? given : infer_gpu_capacity(accounted);
  if (gpu) o.gpu = *gpu;
  o.held_outside = gpu && gpu->total_bytes > accounted ? gpu->total_bytes - accounted : 0;
  // What PyTorch could have put together for it: free pieces of its own memory pool, and the driver's free memory.
  const uint64_t free_total = o.cached_free - o.free_other_mempools + o.device_free;
  // No cached block held the request, so the allocator asked the driver for a new segment: 2 MiB for a small
  // request, 20 MiB for one under 10 MiB, else the request rounded up to 2 MiB. Expandable segments map pages of
  // 2 MiB (small pool) or 20 MiB (large) instead; a free tail of the stream's segment may cover part of it, so that
  // is an upper bound there. A driver with more free than the request but less than that segment still fails it.
  const uint64_t rounded = detail::round_size(o.requested);
  const uint64_t page = rounded <= detail::kSmallSize ? detail::kSmallBuffer : detail::kLargeBuffer;
  o.driver_needed = o.expandable_segments ? (rounded + page - 1) / page * page : detail::segment_size(rounded);
  // What must fit once PyTorch gave everything back: that segment (an exact size without expandable segments; with
  // them only the request is sure, the page rounding being an upper bound).
  const uint64_t outside_needed = o.expandable_segments ? o.requested : o.driver_needed;
  using memviz::format_size;
  const std::string req = format_size(o.requested);
  if (gpu && o.requested > gpu->total_bytes) {
    o.cause = OomCause::kRequestTooLarge;
    o.advice = "one " + req + " tensor is larger than the whole GPU (" + format_size(o.gpu.total_bytes) +
               "); freeing other tensors cannot help. Make that tensor smaller (batch size, sequence length, "
               "chunk the operation), shard it across GPUs, or use a GPU with more memory.";
    if (gpu->inferred) {
      // The file cannot tell a small GPU from a large one whose rest is held elsewhere: say which numbers decide.
      o.cause_sure = false;
      o.advice += " Unsure: the file does not hold the GPU's size; " + format_size(o.gpu.total_bytes) +
                  " is the smallest common GPU that fits PyTorch's " + format_size(o.reserved) + " plus the driver's " +
                  format_size(o.device_free) + " free. On a GPU larger than " + req + " the cause is memory held "
                  "outside PyTorch instead; pass --gpu NAME to decide.";
    }
  } else if (outside_needed > accounted) {
    o.cause = OomCause::kHeldOutside;
    o.advice = "the request needs " + format_size(outside_needed - accounted) + " more than PyTorch's whole " +
               format_size(o.reserved) + " plus the driver's " + format_size(o.device_free) +
               " free, so freeing PyTorch's tensors cannot make room: " +
               (o.gpu.inferred ? "at least " : "") + format_size(o.held_outside) + " of the GPU" +
               (o.gpu.inferred ? " (if it is the smallest that fits: " + o.gpu.label + ")" : "") +
               " is held outside PyTorch's allocator. Find who holds it: nvidia-smi for other "
               "processes; in this one, torch.cuda.mem_get_info() against torch.cuda.memory_reserved(); NCCL "
               "buffers (NCCL_BUFFSIZE), CuPy's or JAX's pools (XLA_PYTHON_CLIENT_PREALLOCATE=false), CUDA graphs.";
  } else if (o.device_free >= o.driver_needed) {
    o.cause = OomCause::kAllocatorCap;
    o.advice = "the driver reported " + format_size(o.device_free) + " free, enough for the " +
               format_size(o.driver_needed) + " segment " + req +
               " needs, yet the allocator refused: this process is capped below the GPU's size. Look for "
               "torch.cuda.set_per_process_memory_fraction (PyTorch's message then says how much is \"allowed\") "
               "and raise or remove the cap, or keep less alive under it.";
  } else if (o.usable_largest_free_block < o.requested && o.largest_free_other_mempool >= o.requested) {
    // The piece is there, but in a private pool: not this request's, and not released while its graph lives.
    o.cause = OomCause::kLiveTensors;
    o.advice = format_size(o.free_other_mempools) + " is free inside PyTorch's segments in " +
               (o.request_in_private_pool ? std::string("memory pools other than the one this request was made in")
                                          : std::string("private memory pools (a CUDA graph's, or a "
                                                        "torch.cuda.MemPool's)")) +
               ", the largest piece " + format_size(o.largest_free_other_mempool) +
               ", but a private pool serves only allocations made inside its graph capture or use_mem_pool, and "
               "PyTorch does not release a live graph's pool to make room. This request could use " +
               format_size(o.usable_free) + " of PyTorch's free memory, and the driver had " +
               format_size(o.device_free) + ". Memory held by live CUDA graphs and live tensors is what fills the "
               "GPU: delete graphs no longer replayed (and their pools with them), capture fewer or smaller graphs, "
               "share one pool between graphs (graph_pool_handle), or keep less alive.";
  } else if (o.usable_largest_free_block < o.requested && o.largest_free_other_streams >= o.requested) {
    // A free block on another stream was large enough, but a block serves only its own stream. That is not a
    // hole problem, and expandable segments would not help.
    o.cause = OomCause::kFragmentation;
    o.advice = format_size(o.cached_free) + " is free inside PyTorch's segments, " + format_size(o.free_other_streams) +
               " of it cached for other CUDA streams than this request's (stream " + std::to_string(o.stream) +
               "). The caching allocator keeps a pool per stream: a free block serves only the stream it was "
               "allocated on (and requests up to 1 MiB only 2 MiB small-pool segments). This request could use " +
               format_size(o.usable_free) + ", in pieces of at most " + format_size(o.usable_largest_free_block) +
               ", and the driver had " + format_size(o.device_free) + ". Allocate it on the stream that freed the "
               "memory, or free the other stream's tensors that keep those segments: empty_cache() returns only "
               "segments with nothing left in them.";
  } else if (o.usable_largest_free_block < o.requested && o.largest_free_other_pool >= o.requested) {
    // Free on this stream, but in the other pool: requests up to 1 MiB take only 2 MiB small-pool segments, and
    // larger ones only the large pool.
    o.cause = OomCause::kFragmentation;
    o.advice = format_size(o.largest_free_other_pool) + " is free in one piece, but in the " +
               (o.requested <= detail::kSmallSize ? std::string("large pool, and a request of up to 1 MiB is served "
                                                                "only from 2 MiB small-pool segments")
                                                  : std::string("small pool, which serves only requests of up to "
                                                                "1 MiB")) +
               "; the new " + format_size(o.driver_needed) + " segment it needed was more than the driver's " +
               format_size(o.device_free) + ". Free some tensors of this request's size class, or keep less alive.";
  } else if (free_total >= o.driver_needed) {
    // The free pieces inside PyTorch's segments and the driver's free memory would hold the segment the request
    // needs, but no piece does: PyTorch never joins them, and had already released every wholly free segment.
    o.cause = OomCause::kFragmentation;
    o.advice = format_size(o.cached_free) + " is free inside PyTorch's segments and " +
               format_size(o.device_free) + " in the driver, but the largest free block is " +
               format_size(o.largest_free_block) + ": no piece holds " + req + ". " +
               (o.expandable_segments
                    // With expandable segments PyTorch splits any block (should_split never reads max_split_size),
                    // so max_split_size_mb would only stop large free blocks serving smaller requests: no help.
                    ? std::string("expandable_segments is already on: the free pieces lie between live tensors in "
                                  "pages PyTorch cannot unmap (it returns only whole free pages), and no allocator "
                                  "setting joins them. Allocate the large long-lived tensors first, or free the "
                                  "small long-lived tensors that sit between the free pieces.")
                    : std::string("Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (segments grow in place "
                                  "instead of leaving holes), or allocate the large long-lived tensors first."));
  } else {
    o.cause = OomCause::kLiveTensors;
    o.advice = "live tensors hold " + format_size(o.allocated) + "; ";
    if (o.device_free >= o.requested)
      o.advice += "the driver's " + format_size(o.device_free) + " free is more than the request, but a new " +
                  "segment for it is " + (o.expandable_segments ? "up to " : "") + format_size(o.driver_needed) +
                  " (PyTorch " +
                  (o.expandable_segments
                       ? std::string("maps expandable segments in pages of 20 MiB, 2 MiB for requests up to 1 MiB")
                   : o.requested <= detail::kSmallSize    ? std::string("reserves 2 MiB for requests up to 1 MiB")
                   : o.requested < detail::kMinLargeAlloc ? std::string("reserves 20 MiB for requests under 10 MiB")
                                                          : std::string("reserves the request rounded up to 2 MiB")) +
                  ") and no cached block holds it. ";
    else
      o.advice += std::string("the request needs ") + (o.expandable_segments ? "up to " : "") +
                  format_size(o.driver_needed - std::min(o.driver_needed, free_total)) +
                  " more than is free. ";
    o.advice += "Keep less alive at this point: the largest live allocations are listed (smaller batch or "
                "sequence, activation checkpointing, drop references earlier, set_to_none gradients).";
    if (o.free_other_mempools)
      o.advice += " " + format_size(o.free_other_mempools) + " more is free in " +
                  (o.request_in_private_pool ? std::string("memory pools other than this request's")
                                             : std::string("private memory pools (CUDA graphs, MemPool)")) +
                  ", which serve only allocations made inside their capture or use_mem_pool.";
    if (o.held_outside >= (2ull << 30))
      o.advice += " Also, " + format_size(o.held_outside) + " of the GPU is held outside PyTorch (if the GPU is " +
                  o.gpu.label + ").";
  }
  o.fragmentation = o.cause == OomCause::kFragmentation;
  if (o.gpu_given_too_small)
    o.advice = "the GPU given (" + format_size(given->total_bytes) + ") is smaller than the " + format_size(accounted) +
               " this OOM shows in use (PyTorch's " + format_size(o.reserved) + " reserved plus the driver's " +
               format_size(o.device_free) + " free), so it cannot be the GPU this ran on: it was set aside" +
               (o.gpu.total_bytes ? std::string(" for the inferred one. ") : std::string(" (no GPU we know holds "
                                                                                        "these numbers either). ")) +
               o.advice;
}

}  // namespace

std::vector<OomReport> analyze_ooms(const Snapshot& s, const Lifetimes& lifetimes, const OomOptions& options) {
  const uint32_t top = options.top;
  const bool expandable = s.expandable_segments();
  std::vector<OomReport> out;
  const EventColumns& ev = s.events;
  for (const DeviceLifetimes& lt : lifetimes.devices) {
    std::vector<uint32_t> events;
    for (uint32_t i = 0; i < lt.event_count; ++i)
      if (ev.action[lt.event_begin + i] == Action::kOom) events.push_back(i);
    if (events.empty()) continue;
    const uint32_t ooms_on_device = static_cast<uint32_t>(events.size());
    if (options.max_per_device && events.size() > options.max_per_device) {
      const size_t head = options.max_per_device / 2, tail = options.max_per_device - head;
      events.erase(events.begin() + static_cast<std::ptrdiff_t>(head), events.end() - static_cast<std::ptrdiff_t>(tail));
    }
    // The state index is only built for devices that failed: most snapshots have no oom at all.
    const SegmentTimeline st = build_segment_timeline(s, lt.device);
    const AllocatorStateIndex index(s, lt, st);
    // A merged snapshot's outside part, built once per device however many OOMs it has.
    std::unique_ptr<OutsideIndex> outside = s.outside ? std::make_unique<OutsideIndex>(s, lt.device) : nullptr;
    const FinalSegments finals(s, lt.device);
    std::unordered_map<int64_t, uint64_t> last_alloc_on;  // stream -> address of its latest alloc before `scanned`
    uint32_t scanned = 0;
    AllocatorState state;
    for (uint32_t e : events) {
      const uint32_t r = lt.event_begin + e;
      OomReport o;
      o.device = lt.device;
      o.event = e;
      o.ooms_on_device = ooms_on_device;
      o.time_us = ev.time_us[r];
      o.requested = ev.size[r];
      o.device_free = ev.addr[r];
      if (outside) {
        const OutsideAt out = outside->at(o.time_us, 0);
        o.has_outside = true;
        o.captured_outside = out.bytes;
        o.outside_by_owner = out.by_owner;
      }
      index.at(e, &state);  // step e: after the e events before the oom
      o.reserved = state.reserved_bytes;
      o.allocated = state.allocated_bytes;  // pending frees left out, as memory_allocated(); they are not free either
      o.requested_live = state.requested_bytes;
      o.cached_free = state.inactive_bytes;  // reserved - allocated - pending frees
      o.pending_free = state.pending_free_bytes;
      // Blocks freed while another stream's queued work still used them are neither allocated nor free: not live.
      o.live_allocations = 0;
      for (uint8_t pending : state.block_pending_free) o.live_allocations += !pending;
      o.stream = ev.stream[r];
      // Gaps between a segment's active blocks (both in address order) are its free blocks. Which of them the
      // request could use: its stream's, in its pool. Small-pool segments are exactly 2 MiB. An expandable segment's
      // pool is the one its final `segments` entry names (segment_type); else a mapped range that is not a whole
      // number of the large pool's 20 MiB pages is the small pool's; else it cannot be told, and counts for both.
      const bool small_request = o.requested <= detail::kSmallSize;
      // The request's memory pool: the pool of the segment the last allocation before it on its stream landed in
      // (inside a graph capture or use_mem_pool, that is the private pool; else the default one).
      // One forward pass over the events for all of this device's OOMs (a walk back from each was quadratic in
      // a file of many OOMs and few allocations).
      for (; scanned < e; ++scanned) {
        const uint32_t rj = lt.event_begin + scanned;
        if (ev.action[rj] == Action::kAlloc) last_alloc_on[ev.stream[rj]] = ev.addr[rj];
      }
      const auto last = last_alloc_on.find(o.stream);
      const std::pair<int64_t, int64_t> request_pool =
          last == last_alloc_on.end() ? std::pair<int64_t, int64_t>{0, 0} : finals.mempool_at(last->second);
      o.request_in_private_pool = request_pool != std::pair<int64_t, int64_t>{0, 0};
      for (size_t k = 0; k < state.segment_addr.size(); ++k) {
        const bool same_mempool = finals.mempool_at(state.segment_addr[k]) == request_pool;
        const bool same_stream = state.segment_stream[k] == o.stream;
        bool same_pool;
        if (state.segment_expandable[k]) {
          const Pool pool = finals.expandable_pool(state.segment_addr[k], state.segment_size[k]);
          same_pool = pool == Pool::kUnknown || (pool == Pool::kSmall) == small_request;
        } else {
          same_pool = (state.segment_size[k] == detail::kSmallBuffer) == small_request;
        }
        const bool usable = same_stream && same_pool && same_mempool;
        auto gap = [&](uint64_t bytes) {
          o.largest_free_block = std::max(o.largest_free_block, bytes);
          if (!same_mempool) {
            o.free_other_mempools += bytes;
            o.largest_free_other_mempool = std::max(o.largest_free_other_mempool, bytes);
            return;  // neither this request's stream nor its size pool can make it usable
          }
          if (usable) o.usable_free += bytes, o.usable_largest_free_block = std::max(o.usable_largest_free_block, bytes);
          if (!same_stream) o.free_other_streams += bytes;
          // Only a block of the request's own pool could have served it on its own stream.
          if (!same_stream && same_pool) o.largest_free_other_streams = std::max(o.largest_free_other_streams, bytes);
          if (!same_pool) o.largest_free_other_pool = std::max(o.largest_free_other_pool, bytes);
        };
        uint64_t cursor = state.segment_addr[k];
        const uint64_t seg_end = state.segment_addr[k] + state.segment_size[k];
        const uint32_t b0 = state.segment_first_block[k], b1 = b0 + state.segment_num_blocks[k];
        for (uint32_t b = b0; b < b1; ++b) {
          if (state.block_addr[b] > cursor) gap(state.block_addr[b] - cursor);
          cursor = std::max(cursor, state.block_addr[b] + state.block_size[b]);
        }
        if (seg_end > cursor) gap(seg_end - cursor);
      }
      o.expandable_segments = expandable;
      classify(o, options.gpu);
      std::vector<uint32_t> alive;
      for (uint32_t i = 0; i < lt.count(); ++i)  // live: alive and not freed yet (a pending free is neither)
        if (lt.alive_at(i, e) && !(lt.free_requested_event[i] != kNoEvent && lt.free_requested_event[i] < e))
          alive.push_back(i);
      const size_t n = std::min<size_t>(top, alive.size());
      std::partial_sort(alive.begin(), alive.begin() + n, alive.end(), [&](uint32_t a, uint32_t b) {
        return lt.size[a] != lt.size[b] ? lt.size[a] > lt.size[b] : a < b;
      });
      o.top_rows.assign(alive.begin(), alive.begin() + n);
      out.push_back(std::move(o));
    }
  }
  return out;
}

}  // namespace allocscope
