// The caching allocator's state at any step (segments with their active blocks, pending frees, rounding waste),
// answered from the checkpointed layouts of blocks and segments instead of replaying the trace per query.
//
// Blocks are the allocations alive at the step (the Active Memory Timeline's rows) plus blocks the final segments
// hold as `active_pending_free` without a traced alloc (PyTorch's timeline leaves those out; its "Allocator State
// History" keeps them). A block is pending free from its `free_requested` until its `free_completed`.
// Allocator block sizes are exact when the final segments know the block; otherwise they are estimated as the
// request rounded up to the allocator's 512-byte minimum, plus the gap after it when that gap is an unsplit
// large-pool tail (1 MiB or less up to the next block or the segment's end, where no free block fits). Otherwise it
// is a lower bound: a tail beside a larger free range cannot be told apart. `block_size_known` says which.
#pragma once

#include <cstdint>
#include <vector>

#include "allocscope/lifetimes.h"
#include "allocscope/segment_timeline.h"
#include "allocscope/timeline.h"

namespace allocscope {

struct AllocatorState {
  uint32_t step = 0;
  // Segments in address order; adjacent mapped ranges of one expandable segment on one stream are merged, like
  // PyTorch's viewer. Blocks of segment k are rows [segment_first_block[k], + segment_num_blocks[k]) below.
  std::vector<uint64_t> segment_addr;
  std::vector<uint64_t> segment_size;
  std::vector<int64_t> segment_stream;
  std::vector<uint8_t> segment_expandable;
  std::vector<uint32_t> segment_first_block;
  std::vector<uint32_t> segment_num_blocks;
  std::vector<uint64_t> segment_allocated;  // sum of its blocks' sizes, pending frees left out (its allocated_size)
  std::vector<uint64_t> segment_requested;  // sum of requested sizes inside it

  // Active blocks in address order.
  std::vector<uint64_t> block_addr;
  std::vector<uint64_t> block_size;       // allocator size (exact or estimated, see block_size_known)
  std::vector<uint64_t> block_requested;  // the request
  std::vector<int64_t> block_stream;
  std::vector<StackId> block_stack;
  std::vector<uint32_t> block_row;        // row in DeviceLifetimes, kNoRow for pending-free blocks it leaves out
  std::vector<uint8_t> block_pending_free;
  std::vector<uint8_t> block_size_known;

  uint64_t reserved_bytes = 0;       // sum of segment sizes
  uint64_t allocated_bytes = 0;      // sum of block sizes, pending frees left out (PyTorch's memory_allocated())
  uint64_t requested_bytes = 0;      // sum of requests, pending frees left out
  uint64_t pending_free_bytes = 0;   // block sizes waiting for free_completed
  uint64_t rounding_waste_bytes = 0; // allocated - requested (internal fragmentation), pending frees left out
  uint64_t inactive_bytes = 0;       // reserved - allocated - pending free (cached and free)
  uint32_t blocks_outside_segments = 0;  // blocks no segment contains (a sign of an inconsistent file)
};

class AllocatorStateIndex {
 public:
  AllocatorStateIndex() = default;
  AllocatorStateIndex(const Snapshot& snapshot, const DeviceLifetimes& lifetimes, const SegmentTimeline& segments,
                      uint32_t checkpoint_interval = 1024);
  uint32_t steps() const { return blocks_.steps(); }
  // Fills `out` (vectors are reused) with the state at `step` (0 = before the first event).
  void at(uint32_t step, AllocatorState* out) const;

 private:
  // Block rows: pending-only blocks first (alive from step 0), then the lifetimes' rows in order.
  StackedTimeline blocks_;
  std::vector<uint64_t> addr_, size_, requested_;
  std::vector<int64_t> stream_;
  std::vector<StackId> stack_;
  std::vector<uint32_t> row_;
  std::vector<uint32_t> pending_from_;  // step from which the block is pending free (UINT32_MAX: never)
  std::vector<uint8_t> known_;
  uint32_t extra_ = 0;  // rows before the lifetimes' rows

  StackedTimeline segments_;
  std::vector<uint64_t> seg_addr_, seg_size_;
  std::vector<int64_t> seg_stream_;
  std::vector<uint8_t> seg_expandable_;
};

}  // namespace allocscope
