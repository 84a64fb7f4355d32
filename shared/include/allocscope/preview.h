// A first picture of a snapshot still being read (issue 43): the memory curve of the trace entries parsed so far,
// drawn while the rest of the file streams in, long before the exact timeline (which needs the whole file: the blocks
// alive before the trace are known only from the segments, and each device's rows only once its list ends).
#pragma once

#include <cstdint>
#include <vector>

#include "allocscope/snapshot.h"

namespace allocscope {

// Active bytes over the trace rows in file order, as allocations minus completed frees from the first row read
// (PyTorch's Active Memory Timeline pairs `alloc` with `free_completed` the same way). Blocks alive before the trace
// are not counted, so the curve starts at 0 and may dip below it; the exact view adds them. Rows of several devices
// follow one another as the file lists them. Kept as at most `max_columns` columns of min/max/last that halve their
// resolution as the trace grows, so its memory is fixed whatever the file's size, and extending it reads each new
// row once.
class PreviewCurve {
 public:
  explicit PreviewCurve(uint32_t max_columns = 1024);

  // Reads the rows of `events` not read before (the parse appends rows; the ones read are never changed).
  void extend(const EventColumns& events);

  uint64_t rows() const { return rows_; }                       // rows read
  uint64_t rows_per_column() const { return per_column_; }      // each column's rows (the last one's may be fewer)
  const std::vector<int64_t>& low() const { return low_; }      // per column: the lowest level in it
  const std::vector<int64_t>& high() const { return high_; }    // per column: the highest
  int64_t level() const { return level_; }                      // after the last row read
  int64_t highest() const { return highest_; }                  // over every row read
  uint64_t highest_row() const { return highest_row_; }         // the row after which it was reached (first time)

 private:
  void halve();
  uint32_t max_columns_;
  uint64_t rows_ = 0;
  uint64_t per_column_ = 1;
  int64_t level_ = 0;
  int64_t highest_ = 0;
  uint64_t highest_row_ = 0;
  std::vector<int64_t> low_, high_;
};

}  // namespace allocscope
