// Differences between two snapshots (before/after, or two ranks): segments present in only one (PyTorch's
// `compare` rule: same address and total size) and the live memory of each stack with its size delta.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "allocscope/lifetimes.h"
#include "allocscope/snapshot.h"

namespace allocscope {

struct SnapshotDiff {
  // Segments only in A / only in B, in file order.
  std::vector<uint64_t> only_a_addr, only_a_size;
  std::vector<uint64_t> only_b_addr, only_b_size;
  uint64_t reserved_a = 0, reserved_b = 0;
  uint64_t live_a = 0, live_b = 0;  // requested bytes of active blocks in the final segments

  // The allocated peak of each device of each file (the summary's peak: live requested bytes over the trace, step 0
  // included). Two runs of one job usually differ here, not at the end.
  std::vector<std::pair<int64_t, uint64_t>> peaks_a, peaks_b;  // (device, bytes)
  // Devices whose "peak" is only the state the snapshot holds (no trace): said so, never read as a peak.
  std::vector<int64_t> no_trace_a, no_trace_b;

  // Live memory (active blocks of the final segments) per stack, keyed by the stack's visible frames (outermost
  // first, "file.py:LINE:name;..."), so stacks compare across files. Sorted by |delta| (largest first), then by key.
  std::vector<std::string> stack;  // the key; "<no frames>" for frameless blocks
  std::vector<std::string> site;   // the deepest user frame of the stack (what to show first)
  std::vector<uint64_t> bytes_a, bytes_b;
  std::vector<uint32_t> count_a, count_b;
  std::vector<int64_t> delta;      // bytes_b - bytes_a
  size_t groups() const { return stack.size(); }
};

// `la`/`lb`: each file's lifetimes when the caller already built them (the viewer keeps them per file); built here
// otherwise, for the peaks.
SnapshotDiff diff_snapshots(const Snapshot& a, const Snapshot& b, const Lifetimes* la = nullptr,
                            const Lifetimes* lb = nullptr);

std::string to_json(const SnapshotDiff& d, uint32_t top = 50);
std::string to_text(const SnapshotDiff& d, const std::string& name_a, const std::string& name_b, uint32_t top = 15);

}  // namespace allocscope
