// Peaks: the highest allocated (active) and reserved bytes of a device, globally or within a step window, and what
// is alive at the allocated peak grouped by stack (a flame-graph tree), by allocation site and by category.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "allocscope/categories.h"
#include "allocscope/frame_filter.h"
#include "allocscope/lifetimes.h"
#include "allocscope/outside.h"
#include "allocscope/owners.h"
#include "allocscope/segment_timeline.h"

namespace allocscope {

// Alive allocations merged by their visible frames, outermost caller at the root. Flat arrays in preorder: node i's
// subtree is [i, end[i]); children are sorted by total bytes, largest first. Node 0 is the root (kNoFrame).
struct FlameTree {
  std::vector<FrameId> frame;
  std::vector<uint32_t> parent;  // kNoRow for the root
  std::vector<uint32_t> depth;
  std::vector<uint32_t> end;
  std::vector<uint64_t> self_bytes;   // allocations whose stack ends here
  std::vector<uint64_t> total_bytes;  // the whole subtree
  std::vector<uint32_t> count;        // allocations in the subtree
  uint32_t size() const { return static_cast<uint32_t>(frame.size()); }
};

struct PeakOptions {
  uint32_t step_begin = 0;                                     // window of steps [begin, end], clamped
  uint32_t step_end = std::numeric_limits<uint32_t>::max();
  uint32_t top = 20;                                           // rows in `largest` and `sites`
};

struct Peak {
  int64_t device = 0;
  uint32_t step_begin = 0, step_end = 0;  // the window actually used
  // Steps here index the loaded trace; the file's step is step + step_offset (DeviceLifetimes::step_offset: a
  // window of the file was loaded).
  int64_t step_offset = 0;

  uint32_t allocated_step = 0;
  uint64_t allocated_bytes = 0;
  int64_t allocated_time_us = 0;
  uint64_t reserved_at_allocated_peak = 0;

  uint32_t reserved_step = 0;
  uint64_t reserved_bytes = 0;
  int64_t reserved_time_us = 0;

  uint32_t alive = 0;                 // allocations alive at the allocated peak
  std::vector<uint32_t> largest;      // lifetimes rows alive at the peak, largest first (at most `top`)
  std::vector<Category> largest_category;  // each one's category, when has_categories (the viewer's table shows it)
  // By site (deepest user frame), largest first (at most `top`).
  std::vector<FrameId> site;
  std::vector<uint64_t> site_bytes;
  std::vector<uint32_t> site_count;
  // By category (present when categories were given).
  bool has_categories = false;
  std::array<uint64_t, kCategoryCount> category_bytes{};
  std::array<uint32_t, kCategoryCount> category_count{};
  FlameTree tree;
  // Snapshots from our capture: the bytes alive at the allocated peak by owner (owners.h), largest first. Merged
  // snapshots (outside.h): PyTorch's reserved bytes then and the capture's outside memory by owner.
  std::vector<std::pair<Owner, uint64_t>> owners;
  // Merged snapshots: the outside memory at the allocated peak (bytes, owners, top sites) and its own highest total.
  OutsideAt outside;
  uint64_t outside_peak = 0;
};

// `segments` may be null (then reserved figures are 0); `categories` may be null.
Peak find_peak(const Snapshot& s, const DeviceLifetimes& lt, const SegmentTimeline* segments, const FrameFilter& ff,
               const Categories* categories, const PeakOptions& options = {});

// The tree of any set of rows (e.g. the allocations alive at a hovered step).
FlameTree flame_tree(const Snapshot& s, const DeviceLifetimes& lt, const FrameFilter& ff,
                     const std::vector<uint32_t>& rows);

std::string to_json(const Snapshot& s, const DeviceLifetimes& lt, const Peak& p, bool with_tree = true);
std::string to_text(const Snapshot& s, const DeviceLifetimes& lt, const Peak& p);

}  // namespace allocscope
