// AllocatorStateIndex: block and segment layouts built once; a query rebuilds both alive lists from checkpoints,
// sorts them by address and nests blocks in segments.
#include "allocscope/allocator_state.h"

#include <algorithm>
#include <numeric>

#include "analysis/addr_map.h"
#include "analysis/allocator_rules.h"

namespace allocscope {

namespace {

using detail::kSmallSize;

constexpr uint32_t kNever = UINT32_MAX;

}  // namespace

AllocatorStateIndex::AllocatorStateIndex(const Snapshot& s, const DeviceLifetimes& lt, const SegmentTimeline& sg,
                                         uint32_t interval) {
  const uint32_t n = lt.event_count;
  // Pending-free blocks of the final state the timeline leaves out (no traced alloc).
  detail::AddrMap alive_at_end(256);
  for (uint32_t i = 0; i < lt.count(); ++i)
    if (lt.free_event[i] == kNoEvent) alive_at_end.put(lt.addr[i], i);
  std::vector<uint32_t> birth, death;
  for (const Segment& seg : s.segments) {
    if (seg.device != lt.device) continue;
    for (const Block& b : s.blocks_of(seg)) {
      if (b.state != BlockState::kActivePendingFree || alive_at_end.get(b.address) != detail::AddrMap::kAbsent) continue;
      addr_.push_back(b.address);
      size_.push_back(b.size);
      requested_.push_back(b.requested_size);
      stream_.push_back(seg.stream);
      stack_.push_back(b.stack);
      row_.push_back(kNoRow);
      pending_from_.push_back(0);
      known_.push_back(1);
      birth.push_back(0);
      death.push_back(n + 1);
    }
  }
  extra_ = static_cast<uint32_t>(addr_.size());
  if (extra_ > 0) {
    // Pending since its last free_requested that no free_completed followed, if the window saw it.
    detail::AddrMap last_request(256);
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t r = lt.event_begin + i;
      if (s.events.action[r] == Action::kFreeRequested) last_request.put(s.events.addr[r], i);
      if (s.events.action[r] == Action::kFreeCompleted) last_request.erase(s.events.addr[r]);
    }
    for (uint32_t k = 0; k < extra_; ++k) {
      const uint32_t e = last_request.get(addr_[k]);
      if (e != detail::AddrMap::kAbsent) pending_from_[k] = e + 1;
    }
  }
  for (uint32_t i = 0; i < lt.count(); ++i) {
    addr_.push_back(lt.addr[i]);
    const bool known = lt.block_size[i] != 0;
    size_.push_back(known ? lt.block_size[i] : detail::round_size(lt.size[i]));
    requested_.push_back(lt.size[i]);
    stream_.push_back(lt.stream[i]);
    stack_.push_back(lt.stack[i]);
    row_.push_back(i);
    // Pending from its free_requested. PyTorch records free_requested before every free_completed, so a block
    // allocated before the window whose free_completed the window holds without that request was already pending
    // at step 0 (an audit: PyTorch 2.0-2.4 files whose one-entry or wrapped traces start there).
    uint32_t pending = lt.free_requested_event[i] == kNoEvent ? kNever : lt.free_requested_event[i] + 1;
    if (pending == kNever && lt.origin[i] == LifetimeOrigin::kFreedOnly && lt.free_event[i] != kNoEvent &&
        s.events.action[lt.event_begin + lt.free_event[i]] == Action::kFreeCompleted)
      pending = 0;
    pending_from_.push_back(pending);
    known_.push_back(known);
    birth.push_back(lt.birth_step(i));
    death.push_back(lt.death_step(i));
  }
  blocks_ = StackedTimeline(std::move(birth), std::move(death), size_, lt.steps(), interval);

  seg_addr_ = sg.addr;
  seg_size_ = sg.size;
  seg_stream_ = sg.stream;
  seg_expandable_ = sg.expandable;
  segments_ = layout_segments(sg, interval);
}

void AllocatorStateIndex::at(uint32_t step, AllocatorState* o) const {
  o->step = step;
  thread_local std::vector<uint32_t> rows, segs;
  blocks_.alive_at(step, &rows);
  segments_.alive_at(step, &segs);
  std::sort(rows.begin(), rows.end(), [&](uint32_t a, uint32_t b) { return addr_[a] < addr_[b]; });
  std::sort(segs.begin(), segs.end(), [&](uint32_t a, uint32_t b) { return seg_addr_[a] < seg_addr_[b]; });

  o->segment_addr.clear();
  o->segment_size.clear();
  o->segment_stream.clear();
  o->segment_expandable.clear();
  for (uint32_t k : segs) {
    // Mapped ranges of an expandable segment that touch on the same stream form one segment.
    if (!o->segment_addr.empty() && seg_expandable_[k] && o->segment_expandable.back() &&
        o->segment_stream.back() == seg_stream_[k] &&
        o->segment_addr.back() + o->segment_size.back() == seg_addr_[k]) {
      o->segment_size.back() += seg_size_[k];
      continue;
    }
    o->segment_addr.push_back(seg_addr_[k]);
    o->segment_size.push_back(seg_size_[k]);
    o->segment_stream.push_back(seg_stream_[k]);
    o->segment_expandable.push_back(seg_expandable_[k]);
  }
  const size_t ns = o->segment_addr.size();
  o->segment_first_block.assign(ns, 0);
  o->segment_num_blocks.assign(ns, 0);
  o->segment_allocated.assign(ns, 0);
  o->segment_requested.assign(ns, 0);

  const size_t nb = rows.size();
  o->block_addr.resize(nb);
  o->block_size.resize(nb);
  o->block_requested.resize(nb);
  o->block_stream.resize(nb);
  o->block_stack.resize(nb);
  o->block_row.resize(nb);
  o->block_pending_free.resize(nb);
  o->block_size_known.resize(nb);
  o->reserved_bytes = std::accumulate(o->segment_size.begin(), o->segment_size.end(), uint64_t{0});
  o->allocated_bytes = o->requested_bytes = o->pending_free_bytes = 0;
  o->blocks_outside_segments = 0;

  size_t k = 0;  // segment cursor: blocks and segments are both in address order
  for (size_t i = 0; i < nb; ++i) {
    const uint32_t r = rows[i];
    o->block_addr[i] = addr_[r];
    o->block_size[i] = size_[r];
    o->block_requested[i] = requested_[r];
    o->block_stream[i] = stream_[r];
    o->block_stack[i] = stack_[r];
    o->block_row[i] = row_[r];
    const bool pending = pending_from_[r] != kNever && pending_from_[r] <= step;
    o->block_pending_free[i] = pending;
    o->block_size_known[i] = known_[r];
    // Allocated as PyTorch counts it (memory_allocated(), a segment's allocated_size): a block freed while another
    // stream still uses it is no longer allocated, nor free yet. It counts only in pending_free_bytes.
    if (pending) {
      o->pending_free_bytes += size_[r];
    } else {
      o->allocated_bytes += size_[r];
      o->requested_bytes += requested_[r];
    }
    while (k < ns && o->segment_addr[k] + o->segment_size[k] <= addr_[r]) ++k;
    if (k < ns && o->segment_addr[k] <= addr_[r]) {
      if (o->segment_num_blocks[k]++ == 0) o->segment_first_block[k] = static_cast<uint32_t>(i);
      if (!pending) o->segment_allocated[k] += size_[r], o->segment_requested[k] += requested_[r];
    } else {
      ++o->blocks_outside_segments;
    }
  }
  // An estimated block followed, inside its segment, by a gap of at most 1 MiB before the next block (or the
  // segment's end) owns that gap. PyTorch does not split a large-pool block when the remainder is 1 MiB or less
  // (kSmallSize), and no free large-pool block is that small: each is a freed block or a split remainder, both over
  // 1 MiB. So nothing else can lie there. Requests over 1 MiB are the large pool's. Expandable segments split at any
  // remainder of 512 bytes or more, so they have no such tails. A larger gap may still hold a tail beside a free
  // block; the estimate stays a lower bound there.
  for (size_t j = 0; j < ns; ++j) {
    if (o->segment_expandable[j] || o->segment_num_blocks[j] == 0) continue;
    const uint64_t seg_end = o->segment_addr[j] + o->segment_size[j];
    const size_t first = o->segment_first_block[j], last = first + o->segment_num_blocks[j];
    for (size_t i = first; i < last; ++i) {
      if (o->block_size_known[i] || o->block_requested[i] <= kSmallSize) continue;
      const uint64_t end = o->block_addr[i] + o->block_size[i];
      const uint64_t next = i + 1 < last ? o->block_addr[i + 1] : seg_end;
      if (next <= end || next - end > kSmallSize) continue;
      const uint64_t tail = next - end;
      o->block_size[i] += tail;
      if (o->block_pending_free[i]) {
        o->pending_free_bytes += tail;
      } else {
        o->segment_allocated[j] += tail;
        o->allocated_bytes += tail;
      }
    }
  }
  const uint64_t held = o->allocated_bytes + o->pending_free_bytes;
  o->inactive_bytes = o->reserved_bytes > held ? o->reserved_bytes - held : 0;
  o->rounding_waste_bytes = o->allocated_bytes > o->requested_bytes ? o->allocated_bytes - o->requested_bytes : 0;
}

}  // namespace allocscope
