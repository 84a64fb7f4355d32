// PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp, default settings) replayed over a device's
// allocations with new sizes, for what-if predictions of reserved memory. Modelled: round_size (512-byte multiples),
// the small (<= 1 MiB) and large pools per stream, segment sizes (2 MiB, 20 MiB, or the request rounded to 2 MiB),
// best-fit search by (size, address), splitting (small: a remainder of at least 512 bytes; large: more than 1 MiB),
// merging with free neighbours on free, and segments kept until the end (no empty_cache). Under a cap on reserved
// memory (a smaller GPU; set_per_process_memory_fraction), a segment that would cross it first makes the allocator free
// every cached segment nothing is allocated in and try again (release_cached_blocks: with the default
// max_split_size, release_available_cached_blocks does nothing); then it runs out of memory.
// PYTORCH_CUDA_ALLOC_CONF (AllocatorSettings): max_split_size_mb (a block that large is never split, and serves only a
// request within 20 MiB of its size), expandable_segments (one segment per pool and stream that grows by mapping
// 2 MiB pages at its end; free pages stay mapped until memory runs short, when every free block's pages are unmapped).
// Not modelled: roundup_power2_divisions, garbage_collection_threshold (it acts only near a per-process cap, where the
// replay already frees the cache before giving up), CUDA graph pools.
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "allocscope/whatif.h"
#include "analysis/allocator_rules.h"

namespace allocscope {
namespace {

using detail::kMinBlockSize;
using detail::kRoundLarge;
using detail::kSmallSize;
using detail::round_size;
using detail::segment_size;
// Requests from a hostile file are capped (2^56 bytes, far above any GPU) so sizes and addresses stay in range.
constexpr uint64_t kMaxRequest = 1ull << 56;

constexpr uint32_t kNoBlock = UINT32_MAX;

// A block of a segment. A segment's blocks are linked in address order (as PyTorch links Block::prev/next), so a
// free finds its neighbours without a search; the caller frees by the handle alloc gave it, not by address. (An
// ordered map from address to block cost a search for each alloc, split and free: about a third of a replay.)
struct Block {
  uint64_t addr = 0;
  uint64_t size = 0;
  uint32_t segment = 0;
  uint32_t prev = kNoBlock, next = kNoBlock;  // neighbours in the segment
  bool used = false;
  bool small = false;  // its segment's pool
  bool live = false;   // false: a handle merged away or released, kept for reuse
  int64_t stream = 0;
  uint64_t mapped = 0;  // expandable segments: the bytes of its pages mapped (its whole size otherwise)
};

constexpr uint64_t kPage = 2ull << 20;  // an expandable segment maps memory in pages this large
uint64_t pages(uint64_t bytes) { return (bytes + kPage - 1) / kPage * kPage; }

// A pool's free blocks by (size, address), best fit first; the handle rides along (addresses are unique).
using FreeBlock = std::tuple<uint64_t, uint64_t, uint32_t>;

class Replay {
 public:
  Replay(uint64_t cap, const AllocatorSettings& settings) : cap_(cap), settings_(settings) {}

  // The allocated block's handle, or none when the cap leaves no room for the segment it needs (out of memory).
  std::optional<uint32_t> alloc(uint64_t request, int64_t stream) {
    const uint64_t size = round_size(request);
    const bool small = size <= kSmallSize;
    auto& pool = pools_[{stream, small}];
    auto it = fit(pool, size);
    if (it == pool.end() && settings_.expandable_segments) {
      if (!grow_expandable(stream, small, size)) return std::nullopt;
      it = fit(pool, size);
    }
    if (it == pool.end()) {
      const uint64_t seg = segment_size(size);
      if (cap_ && reserved_ + seg > cap_) {
        release_cached();
        if (reserved_ + seg > cap_) return std::nullopt;
      }
      // Best fit breaks size ties by address, so where a segment is mapped matters. While the replay makes the
      // recording's segments (same sizes, same order) they go where its driver put them (the CNN's at rising
      // addresses: 994 MB reserved falling, PyTorch's 1,030 MB following them). Past that, at falling addresses
      // with a gap so they never merge: the driver tends to map each new segment below the last (with rising
      // addresses, 4 of the 26 runs in tests/fixtures/whatif came out 12-14% off PyTorch's max_memory_reserved;
      // falling, all within 0.7%).
      uint64_t addr;
      const auto& recorded = settings_.segment_addresses;
      if (following_ && made_ < recorded.size() && recorded[made_].second == seg) {
        addr = recorded[made_].first;
        next_addr_ = std::min(next_addr_, addr);
      } else {
        following_ = false;
        next_addr_ -= seg + kRoundLarge;
        addr = next_addr_;
      }
      ++made_;
      reserved_ += seg;
      Block nb;
      nb.addr = addr;
      nb.size = seg;
      nb.segment = static_cast<uint32_t>(segment_bytes_.size());
      nb.small = small;
      nb.stream = stream;
      nb.mapped = seg;
      const uint32_t h = add_block(nb);
      segment_bytes_.push_back(seg);
      it = pool.insert({seg, addr, h}).first;
    }
    const uint32_t h = std::get<2>(*it);
    pool.erase(it);
    // A free block of an expandable segment may have had its pages unmapped (memory ran short): map what it lacks.
    if (settings_.expandable_segments && blocks_[h].mapped < std::min(size, blocks_[h].size)) {
      const uint64_t more = std::min(pages(size - blocks_[h].mapped), blocks_[h].size - blocks_[h].mapped);
      if (cap_ && reserved_ + more > cap_) {
        pool.insert({blocks_[h].size, blocks_[h].addr, h});
        release_cached();
        if (reserved_ + more > cap_) return std::nullopt;
        return alloc(request, stream);
      }
      reserved_ += more;
      blocks_[h].mapped += more;
    }
    const uint64_t remaining = blocks_[h].size - size;
    // A block of max_split_size or more is never split (PyTorch's should_split).
    const bool split = small ? remaining >= kMinBlockSize : size < settings_.max_split_size && remaining > kSmallSize;
    if (split) {
      Block rest = blocks_[h];  // the same segment, pool and stream
      rest.addr += size;
      rest.size = remaining;
      rest.prev = h;
      rest.mapped = blocks_[h].mapped > size ? blocks_[h].mapped - size : 0;
      const uint32_t r = add_block(rest);  // may move blocks_: indexed from here on
      if (blocks_[r].next != kNoBlock) blocks_[blocks_[r].next].prev = r;
      blocks_[h].next = r;
      blocks_[h].size = size;
      blocks_[h].mapped = std::min(blocks_[h].mapped, size);
      pool.insert({remaining, blocks_[r].addr, r});
      if (auto last = expandable_last_.find({stream, small}); last != expandable_last_.end() && last->second == h)
        last->second = r;  // the rest is the segment's end now
    }
    blocks_[h].used = true;
    allocated_ += blocks_[h].size;
    return h;
  }

  void free(uint32_t h) {
    if (h >= blocks_.size() || !blocks_[h].live || !blocks_[h].used) return;
    Block& b = blocks_[h];
    auto& pool = pools_[{b.stream, b.small}];
    allocated_ -= b.size;
    b.used = false;
    if (b.next != kNoBlock && !blocks_[b.next].used) {  // the next block joins this one
      const uint32_t n = b.next;
      pool.erase({blocks_[n].size, blocks_[n].addr, n});
      b.size += blocks_[n].size;
      b.mapped += blocks_[n].mapped;
      if (expandable_last_.count({b.stream, b.small}) && expandable_last_[{b.stream, b.small}] == n)
        expandable_last_[{b.stream, b.small}] = h;
      unlink(n);
    }
    uint32_t at = h;
    if (b.prev != kNoBlock && !blocks_[b.prev].used) {  // this block joins the previous one
      const uint32_t p = b.prev;
      pool.erase({blocks_[p].size, blocks_[p].addr, p});
      blocks_[p].size += b.size;
      blocks_[p].mapped += b.mapped;
      if (expandable_last_.count({b.stream, b.small}) && expandable_last_[{b.stream, b.small}] == h)
        expandable_last_[{b.stream, b.small}] = p;
      unlink(h);
      at = p;
    }
    pool.insert({blocks_[at].size, blocks_[at].addr, at});
  }

  uint64_t reserved() const { return reserved_; }
  uint64_t allocated() const { return allocated_; }

 private:
  uint32_t add_block(const Block& b) {
    uint32_t h;
    if (!spare_.empty()) {
      h = spare_.back();
      spare_.pop_back();
      blocks_[h] = b;
    } else {
      h = static_cast<uint32_t>(blocks_.size());
      blocks_.push_back(b);
    }
    blocks_[h].live = true;
    return h;
  }
  // Takes block h out of its segment's list (it merged into a neighbour, or its segment was released).
  void unlink(uint32_t h) {
    Block& b = blocks_[h];
    if (b.prev != kNoBlock) blocks_[b.prev].next = b.next;
    if (b.next != kNoBlock) blocks_[b.next].prev = b.prev;
    b.live = false;
    spare_.push_back(h);
  }

  // The best-fit free block for a request, as PyTorch's get_free_block picks it, or end(): under max_split_size a
  // request below it takes no block of that size or more, and a request of that size takes a block at most
  // kLargeBuffer larger (the pool is ordered by size, so the first candidate decides).
  std::set<FreeBlock>::iterator fit(std::set<FreeBlock>& pool, uint64_t size) {
    auto it = pool.lower_bound({size, 0, 0});
    if (it == pool.end() || settings_.max_split_size == UINT64_MAX) return it;
    const uint64_t found = std::get<0>(*it);
    if (size < settings_.max_split_size && found >= settings_.max_split_size) return pool.end();
    if (size >= settings_.max_split_size && found >= size + detail::kLargeBuffer) return pool.end();
    return it;
  }

  // Expandable segments: the pool's one segment grows at its end by the pages the request lacks (its last block,
  // if free, grows; else a new free block follows it). False when the cap leaves no room even after the cache is
  // unmapped.
  bool grow_expandable(int64_t stream, bool small, uint64_t size) {
    auto& pool = pools_[{stream, small}];
    auto last = expandable_last_.find({stream, small});
    const bool tail_free = last != expandable_last_.end() && !blocks_[last->second].used;
    const uint64_t have = tail_free ? blocks_[last->second].size : 0;
    const uint64_t more = pages(size - std::min(size, have));
    if (cap_ && reserved_ + more > cap_) {
      release_cached();
      if (reserved_ + more > cap_) return false;
      // Unmapping gave the tail's pages back: the tail still exists, with fewer mapped pages, which alloc maps again.
    }
    reserved_ += more;
    if (tail_free) {
      const uint32_t t = last->second;
      pool.erase({blocks_[t].size, blocks_[t].addr, t});
      blocks_[t].size += more;
      blocks_[t].mapped += more;
      pool.insert({blocks_[t].size, blocks_[t].addr, t});
      return true;
    }
    Block nb;
    nb.small = small;
    nb.stream = stream;
    nb.size = more;
    nb.mapped = more;
    if (last == expandable_last_.end()) {
      next_addr_ -= 1ull << 44;  // a pool's segment: its own range of addresses
      nb.addr = next_addr_;
      nb.segment = static_cast<uint32_t>(segment_bytes_.size());
      segment_bytes_.push_back(UINT64_MAX);  // never released whole
    } else {
      const Block& tail = blocks_[last->second];
      nb.addr = tail.addr + tail.size;
      nb.segment = tail.segment;
      nb.prev = last->second;
    }
    const uint32_t h = add_block(nb);
    if (blocks_[h].prev != kNoBlock) blocks_[blocks_[h].prev].next = h;
    expandable_last_[{stream, small}] = h;
    pool.insert({blocks_[h].size, blocks_[h].addr, h});
    return true;
  }

  // Frees every segment that is one free block (nothing allocated in it, nothing split off), in every pool: a free
  // block as large as its segment (segments never merge with each other). Expandable segments unmap the pages of
  // every free block instead, wherever it lies.
  void release_cached() {
    if (settings_.expandable_segments) {
      for (Block& b : blocks_)
        if (b.live && !b.used && b.mapped) {
          reserved_ -= b.mapped;
          b.mapped = 0;
        }
      return;
    }
    for (uint32_t h = 0; h < blocks_.size(); ++h) {
      const Block& b = blocks_[h];
      if (!b.live || b.used || b.size != segment_bytes_[b.segment]) continue;
      pools_[{b.stream, b.small}].erase({b.size, b.addr, h});
      reserved_ -= b.size;
      unlink(h);
    }
  }

  std::vector<Block> blocks_;    // by handle
  std::vector<uint32_t> spare_;  // handles free for reuse
  std::map<std::pair<int64_t, bool>, std::set<FreeBlock>> pools_;
  std::map<std::pair<int64_t, bool>, uint32_t> expandable_last_;  // expandable segments: each pool's last block
  uint64_t cap_ = 0;
  AllocatorSettings settings_;
  uint64_t next_addr_ = 1ull << 50, reserved_ = 0, allocated_ = 0;
  size_t made_ = 0;  // segments made (segment_addresses' next)
  bool following_ = true;  // every segment so far was the recording's (in size and order)
  std::vector<uint64_t> segment_bytes_;  // per segment: its size
};

}  // namespace

ReplayOrder replay_order(const DeviceLifetimes& lt) {
  // Events in step order: rows alive before the trace first (step 0), then each step's alloc or free.
  const uint32_t n = lt.count();
  ReplayOrder o;
  auto& order = o.events;
  order.reserve(2 * static_cast<size_t>(n));
  for (uint32_t i = 0; i < n; ++i) {
    order.push_back({lt.birth_step(i), static_cast<int64_t>(i) + 1});
    if (lt.free_event[i] != kNoEvent) order.push_back({lt.death_step(i), -(static_cast<int64_t>(i) + 1)});
  }
  // At one step, frees before allocs (a step is one event; rows born at step 0 precede the first free).
  std::stable_sort(order.begin(), order.end(), [](const auto& x, const auto& y) {
    return x.first != y.first ? (x.first < y.first) : (x.second < 0) > (y.second < 0);
  });
  return o;
}

AllocatorReplay replay_caching_allocator(const DeviceLifetimes& lt, const std::vector<uint64_t>& sizes, uint64_t cap,
                                         const std::vector<uint8_t>* optional, const AllocatorSettings& settings) {
  return replay_caching_allocator(lt, replay_order(lt), sizes, cap, optional, settings);
}

AllocatorReplay replay_caching_allocator(const DeviceLifetimes& lt, const ReplayOrder& order,
                                         const std::vector<uint64_t>& sizes, uint64_t cap,
                                         const std::vector<uint8_t>* optional, const AllocatorSettings& settings) {
  const uint32_t n = lt.count();
  Replay r(cap, settings);
  AllocatorReplay out;
  std::vector<uint32_t> block(n, 0);  // the row's block (Replay::alloc's handle)
  std::vector<uint8_t> held(n, 0);  // allocated (a skipped optional row is not, and its free does nothing)
  for (const auto& [step, e] : order.events) {
    const uint32_t row = static_cast<uint32_t>(e > 0 ? e - 1 : -e - 1);
    // Not in this run (or not a row of `lt`: an order built for another device): neither its alloc nor its free.
    if (row >= n || row >= sizes.size() || sizes[row] == 0) continue;
    if (e > 0) {
      const uint32_t i = row;
      std::optional<uint32_t> a = r.alloc(std::min<uint64_t>(sizes[i], kMaxRequest), lt.stream[i]);
      if (!a) {
        if (optional && i < optional->size() && (*optional)[i]) continue;  // done without; its free is a no-op
        out.out_of_memory = true;
        out.out_of_memory_step = step;
        break;
      }
      block[i] = *a;
      held[i] = 1;
      if (r.allocated() > out.peak_allocated) {
        out.peak_allocated = r.allocated();
        out.peak_allocated_step = step;
      }
      out.peak_reserved = std::max(out.peak_reserved, r.reserved());
    } else {
      const uint32_t i = static_cast<uint32_t>(-e - 1);
      if (held[i]) r.free(block[i]);
    }
  }
  return out;
}

uint64_t least_allocator_room(const DeviceLifetimes& lt, const std::vector<uint64_t>& sizes,
                              const std::vector<uint8_t>* optional, const AllocatorSettings& settings) {
  return least_allocator_room(lt, replay_order(lt), sizes, optional, settings);
}

uint64_t least_allocator_room(const DeviceLifetimes& lt, const ReplayOrder& order, const std::vector<uint64_t>& sizes,
                              const std::vector<uint8_t>* optional, const AllocatorSettings& settings) {
  const AllocatorReplay free_run = replay_caching_allocator(lt, order, sizes, 0, nullptr, settings);
  // Never less than the allocated peak without the optional rows (nothing can be freed below it); bisect up to the
  // uncapped reserved peak.
  uint64_t lo = free_run.peak_allocated, hi = free_run.peak_reserved;
  if (optional) {
    std::vector<uint64_t> without(sizes);
    for (size_t i = 0; i < without.size() && i < optional->size(); ++i)
      if ((*optional)[i]) without[i] = 0;
    lo = replay_caching_allocator(lt, order, without, 0, nullptr, settings).peak_allocated;
  }
  if (lo >= hi) return hi;
  if (!replay_caching_allocator(lt, order, sizes, lo, optional, settings).out_of_memory) return lo;
  while (hi - lo > (1ull << 20)) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (replay_caching_allocator(lt, order, sizes, mid, optional, settings).out_of_memory) lo = mid;
    else hi = mid;
  }
  return hi;
}

}  // namespace allocscope
