// Device memory outside PyTorch's caching allocator, in one snapshot with PyTorch's own.
//
// `allocscope record` of a PyTorch job has two views of the same process: PyTorch's recorder (tensor-level blocks,
// Python stacks, annotations) and the capture (every driver-level allocation, with its owner: owners.h). A merged
// snapshot is PyTorch's pickle, byte for byte, with one more top-level key, `allocscope_outside`: a capture-format
// snapshot of the allocations PyTorch's allocator does not own (NCCL, cuBLAS workspaces, CUDA graphs, the user's own
// cudaMalloc ...). PyTorch's `_memory_viz` and MemoryViz ignore the key; our loader reads it into Snapshot::outside.
// Both recorders stamp events with wall-clock microseconds, so "outside memory at PyTorch's peak" is a time lookup.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "allocscope/frame_filter.h"
#include "allocscope/lifetimes.h"
#include "allocscope/owners.h"
#include "allocscope/result.h"
#include "allocscope/snapshot.h"

namespace allocscope {

// The part of a capture snapshot that PyTorch's allocator does not own: allocations (alloc/map events, their frees,
// live segments) whose stack's owner is not kPyTorch, and that `pytorch`'s own record does not show either: a
// cudaMalloc or cuMemMap whose device, address and size PyTorch's trace stamps within a second of the capture's
// (segment_alloc, segment_map), or, for one still live, a segment PyTorch still holds. Without stacks (a capture
// made with --stacks none, or an unwinder that failed) the record alone tells PyTorch's pool apart, which otherwise
// counted twice. A free goes with the allocation it frees.
Snapshot outside_of_pytorch(const Snapshot& capture, const Snapshot& pytorch);

// Whether a capture and PyTorch's snapshot can come from one process: an error, saying why, when their traces' times
// do not overlap, or when PyTorch reserved memory that the capture never saw (none of its segment allocations, nor
// of the segments it holds, matches one of the capture's by device, address and size). Merging two runs, or two
// ranks, gave answers about memory no process held together.
Status same_process(const Snapshot& capture, const Snapshot& pytorch);

// PyTorch's snapshot pickle (raw bytes, as torch.cuda.memory._dump_snapshot writes it) with `allocscope_outside`
// set to `outside`: PyTorch's bytes are kept as they are, the key is appended before STOP. Bytes after STOP (no
// reader sees them: Python's pickle stops there) are left out. Errors when the pickle's top-level object is not a
// dict or the result does not load back.
Result<std::vector<uint8_t>> merge_outside(std::span<const uint8_t> pytorch_pickle, const Snapshot& outside);

// What `allocscope merge` and the capture's own merge write: PyTorch's pickle with the capture's outside part, after
// same_process; `outside_events`/`outside_segments` count what was added.
struct Merged {
  std::vector<uint8_t> bytes;
  size_t outside_events = 0, outside_segments = 0;
  uint64_t after_stop = 0;  // bytes after PyTorch's STOP, left out (what to tell the user)
};
Result<Merged> merge_capture(std::span<const uint8_t> pytorch_pickle, const Snapshot& capture);

// Outside memory on one device (ordinal) at a wall-clock time: bytes, bytes by owner (largest first) and the top
// sites (FrameIds of *merged.outside, largest first). Empty when the snapshot has no outside part.
struct OutsideAt {
  uint64_t bytes = 0;
  std::vector<std::pair<Owner, uint64_t>> by_owner;
  std::vector<std::pair<FrameId, uint64_t>> sites;
  // Per site, the owners of its bytes (bit 1 << Owner): one line of a script can hold cuBLAS's workspace and cuDNN's.
  std::vector<uint32_t> site_owners;
};
// "NCCL" or "cuBLAS, cuDNN": the labels of an owner mask, largest owner first is not known here: in Owner order.
std::string owner_labels(uint32_t mask);
// ["nccl"] or ["cublas", "cudnn"], in Owner order.
std::vector<std::string> owner_names(uint32_t mask);

// One device's outside part, built once (its lifetimes, owners and sites), then asked at any time: per OOM, per
// drawn column of the viewer's timeline. Always empty when the snapshot has no outside part.
class OutsideIndex {
 public:
  OutsideIndex(const Snapshot& merged, int64_t device);
  OutsideAt at(int64_t time_us, size_t top_sites = 5) const;
  uint64_t bytes_at(int64_t time_us) const;  // alive after the last outside event stamped at or before time_us
  uint64_t peak() const { return peak_; }
  int64_t peak_time_us() const { return peak_time_; }  // the stamp of the first moment at peak()

 private:
  uint32_t step_at(int64_t time_us) const;
  const Snapshot* outside_ = nullptr;
  DeviceLifetimes lt_;
  OwnerMap owners_;
  FrameFilter ff_;
  std::vector<int64_t> time_;  // per outside event, made nondecreasing (stamps taken on different threads)
  uint64_t peak_ = 0;
  int64_t peak_time_ = 0;
};

// OutsideIndex(merged, device).at(time_us, top_sites), for one question.
OutsideAt outside_at(const Snapshot& merged, int64_t device, int64_t time_us, size_t top_sites = 5);

// Device memory by owner at one moment: PyTorch's reserved bytes (from its own segments) with the outside memory's
// owners then (OutsideAt::by_owner), largest first.
std::vector<std::pair<Owner, uint64_t>> owners_with_outside(std::vector<std::pair<Owner, uint64_t>> outside_by_owner,
                                                            uint64_t pytorch_reserved);

}  // namespace allocscope
