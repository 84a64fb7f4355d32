// Keeping part of a snapshot's allocations: a capture's merge keeps what PyTorch's allocator does not own
// (outside.h), and the loader leaves out other processes' memory (peer_mappings.h). One filter for both, so that a
// release always goes with the allocation it releases.
#pragma once

#include <cstdint>
#include <functional>

#include "allocscope/snapshot.h"

namespace allocscope {

// A capture's trace actions that take memory (alloc, segment_alloc, segment_map) and that give it back.
bool is_allocation(Action a);
bool is_release(Action a);

// The stack a live segment was allocated with: its first block's (the capture writes one block per allocation).
StackId segment_stack(const Snapshot& s, const Segment& seg);

// Copies into `out` the rows of `from`'s device traces whose allocation `keep_row` accepts, and the segments
// `keep_segment` accepts. An allocation (alloc, segment_alloc, segment_map) and any other event decide by
// `keep_row(row)`; a release goes with the allocation it releases, or decides by itself when the trace lost that
// allocation. Tables are not copied.
void keep_allocations(const Snapshot& from, const std::function<bool(uint32_t row)>& keep_row,
                      const std::function<bool(const Segment&)>& keep_segment, Snapshot* out);

}  // namespace allocscope
