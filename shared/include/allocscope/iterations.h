// The repeating iteration of a training loop, as step boundaries, from optimizer annotations or the trace's period.
//
// Boundaries b[0] < b[1] < ... are steps (see lifetimes.h). Region r is [b[r-1], b[r]) with b[-1] = 0 and
// b[m] = steps(): region 0 is the prologue before the first boundary (model set-up and, with optimizer
// annotations, the first forward/backward), region m runs from the last boundary to the end of the trace.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "allocscope/lifetimes.h"
#include "allocscope/snapshot.h"

namespace allocscope {

struct Iterations {
  enum class Source : uint8_t { kNone, kAnnotations, kPeriodic, kBackwardCalls };
  Source source = Source::kNone;
  std::string marker;             // the annotation name, or the repeating allocation's site ("file.py:12:fn")
  std::vector<uint32_t> boundary;  // increasing steps
  uint32_t steps = 0;              // the device's steps (n + 1)

  uint32_t regions() const { return static_cast<uint32_t>(boundary.size()) + 1; }
  uint32_t region_of(uint32_t step) const;   // number of boundaries <= step
  uint32_t region_end(uint32_t region) const { return region < boundary.size() ? boundary[region] : steps; }
};
std::string_view iteration_source_name(Iterations::Source s);  // "none", "annotations", "periodic"

// Counts of boundaries before a step, in O(1) for the loops that ask once or twice per allocation (categories,
// leaks): a binary search per call was a quarter of `summarize`'s time on a 1M-event trace. Built from `it` at
// construction, it reads it.boundary, which must outlive it and not change; the answers are std::upper_bound's
// and std::lower_bound's over it exactly.
class RegionIndex {
 public:
  explicit RegionIndex(const Iterations& it);
  uint32_t region_of(uint32_t step) const { return count(step, true); }  // boundaries <= step
  uint32_t before(uint32_t step) const { return count(step, false); }    // boundaries < step

 private:
  uint32_t count(uint32_t step, bool or_equal) const;
  const std::vector<uint32_t>& b_;
  unsigned shift_ = 0;
  std::vector<uint32_t> first_;  // first_[j]: boundaries below step j << shift_ (one past the last bucket too)
};

// Annotations first: the START of each `Optimizer.step#...` on the device (PyTorch's optimizer emits them while
// memory history is recorded). Then the start of each backward() the capture's bootstrap saw (Snapshot::lent_windows:
// a capture without PyTorch's recorder has no annotations, and one backward a step is the usual loop). Otherwise the
// periodic pattern: the allocation stack whose occurrence count is the
// most common count of at least 3 among all stacks, earliest first; its allocations mark iteration starts.
Iterations detect_iterations(const Snapshot& s, const DeviceLifetimes& lt);

}  // namespace allocscope
