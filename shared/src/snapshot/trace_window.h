// Loading a window of a huge trace (LoadOptions::window): the rows kept while the file streams by, so that a
// 100M-event file opened at 1M of its steps holds about 1M rows, not 100M (private to shared/src/snapshot).
//
// What is kept of each device's list, in file order:
// - before the window, only the allocations (alloc, segment_alloc, segment_map, and a pending free_requested) of
//   what is alive at its start, held back until their release is seen, then placed before the window's first
//   entry. Without them a block alive at the start would be known only from its free, whose frames, in PyTorch's
//   default recording, are where it was freed: its site and category would be another line's.
// - every entry inside it.
// - after it, only what keeps the rows consistent with the final segments, which describe the trace's end, not the
//   window's: the releases of blocks and segments alive at the window's end (without them a block freed later would
//   vanish from the window, its free gone and the final segments not holding it), and the allocations still alive
//   at the trace's end (without them the final segments' blocks would read as alive before the trace, inside the
//   window). An allocation made after the window is held back until its release is seen or the list ends, so what
//   is kept is bounded by what is alive, not by the file.
#pragma once

#include <cstdint>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "allocscope/snapshot.h"

namespace allocscope::detail {

class WindowFilter {
 public:
  explicit WindowFilter(TraceWindow w) : w_(w) {}

  // The builder appends each entry's row to the columns, then says so with its ordinal (the entry's index in the
  // file, across all lists); the row stays pending until the next entry comes or its list is known, since a list's
  // first entry is appended before the reader says a list began (Consumer::list_began).
  void before_row(EventColumns& e) {
    if (pending_) settle(e);
  }
  uint64_t row_added() {
    pending_ = true;
    return pending_ordinal_ = next_ordinal_++;
  }
  uint64_t entries_seen() const { return next_ordinal_; }
  void list_began(EventColumns& e, uint64_t first_ordinal);
  // At the end of the pickle: settles the last row and closes the last list.
  void end(EventColumns& e);

  // Where each list of entries went, by the ordinal of its first entry.
  struct ListRows {
    uint64_t first_ordinal = 0;
    uint64_t entries = 0;     // entries the file's list held
    uint32_t begin = 0, end = 0;  // its rows
    uint32_t before = 0;      // of those, the first ones kept from before the window
    uint32_t after = 0;       // and the last ones kept from after it
    uint64_t first_step = 0;  // the file's step of its first row in the window (entries when none is)
    int64_t first_time_us = 0;  // the time of the list's first entry (the origin answers count time from)
    bool any_time = false;    // some entry had a time
  };
  const ListRows* list(uint64_t first_ordinal) const;
  const std::vector<ListRows>& lists() const { return lists_; }
  // A list began at an entry that was not the one just appended (a layout no writer produces): the rows cannot be
  // told apart by list, and the load is refused.
  bool unusual() const { return unusual_; }

 private:
  enum class Phase : uint8_t { kBefore, kIn, kAfter };
  void settle(EventColumns& e);
  void close_list(EventColumns& e);
  // Holds row `row` of `e` (before or after the window) if it must be kept, by the rules above.
  void hold(const EventColumns& e, size_t row, bool after);
  void compact();
  void clear_held();

  TraceWindow w_;
  uint64_t next_ordinal_ = 0;
  bool pending_ = false;
  uint64_t pending_ordinal_ = 0;
  bool unusual_ = false;

  ListRows cur_;  // the list being read
  Phase phase_ = Phase::kBefore;
  int64_t first_time_ = 0;
  std::vector<ListRows> lists_;

  // Rows outside the window: kept ones, and allocations held back (live_ says which are still candidates).
  EventColumns held_;
  std::vector<uint8_t> live_;
  size_t dead_ = 0;
  std::unordered_map<uint64_t, uint32_t> alloc_;      // addr -> row in held_ of an allocation not yet released
  std::unordered_map<uint64_t, uint32_t> requested_;  // addr -> its free_requested
  std::unordered_map<uint64_t, uint32_t> segment_;    // addr -> segment_alloc not yet freed
  std::map<std::pair<uint64_t, uint64_t>, uint32_t> mapped_;  // (addr, size) -> segment_map not yet unmapped
};

}  // namespace allocscope::detail
