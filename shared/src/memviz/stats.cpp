// `segsum` from `_memory_viz.py` (the `stats` verb): how the allocator has filled its segments, byte for byte.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "allocscope/memviz.h"
#include "memviz/frames.h"

namespace allocscope::memviz {
namespace {

constexpr int64_t kPageSize = 1024 * 1024 * 20;

// Python's floor division (rounds toward minus infinity) for a positive divisor.
int64_t floordiv(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

// `_report_free`: "TOTAL (X.X% internal)", or just the size when nothing is free.
std::string report_free(int64_t free_external, int64_t free_internal) {
  const int64_t total = free_external + free_internal;
  std::string suffix;
  if (total != 0) {
    const double pct = (static_cast<double>(free_internal) / static_cast<double>(total)) * 100;
    suffix = " (" + format_1f(pct) + "% internal)";
  }
  return format_size(total) + suffix;
}

// `calc_active`: bytes of the segment's active_allocated blocks (the secondary sort key).
int64_t calc_active(const Snapshot& s, const Segment& seg) {
  int64_t sum = 0;
  for (const Block& b : s.blocks_of(seg))
    if (b.state == BlockState::kActiveAllocated) sum += static_cast<int64_t>(b.size);
  return sum;
}

struct Range {
  int64_t start;
  int64_t size;
};

// The bar: one character per 20 MiB page; a letter for a page one block fills, a digit for the tenths filled by
// several, '*' when full, ' ' when free. Ranges use requested sizes, as PyTorch does.
// A bar is drawn for the first kMaxBarPages pages (20 TiB, past any GPU's memory): a 2.9 KB file claiming 2^50-byte
// segments asked for 1 GB of bars and 1.8 GB of memory (an audit). Such a bar ends in "..." and says how many more.
constexpr int64_t kMaxBarPages = int64_t{1} << 20;

std::string segment_bar(int64_t total_size, const std::vector<Range>& ranges) {
  const int64_t pages = total_size > 0 ? floordiv(total_size - 1, kPageSize) + 1 : 0;
  const int64_t nseg = std::min(pages, kMaxBarPages);
  std::string occupied(static_cast<size_t>(nseg), ' ');
  std::vector<double> frac(static_cast<size_t>(nseg), 0.0);
  for (size_t i = 0; i < ranges.size(); ++i) {
    const int64_t start_ = ranges[i].start;
    const int64_t finish_ = start_ + ranges[i].size;
    const int64_t start = floordiv(start_, kPageSize);
    const int64_t finish = floordiv(finish_ - 1, kPageSize) + 1;
    const char m = static_cast<char>('a' + i % 26);
    for (int64_t j = std::max<int64_t>(start, 0); j < finish && j < nseg; ++j) {
      const int64_t s = std::max(start_, j * kPageSize);
      const int64_t e = std::min(finish_, (j + 1) * kPageSize);
      frac[j] += static_cast<double>(e - s) / static_cast<double>(kPageSize);
      if (occupied[j] != ' ') {
        // PyTorch indexes '0123456789*' with int(frac * 10); overlapping ranges (a corrupt file) would overflow it.
        const int64_t idx = static_cast<int64_t>(frac[j] * 10);
        occupied[j] = "0123456789*"[std::clamp<int64_t>(idx, 0, 10)];
      } else {
        occupied[j] = m;
      }
    }
  }
  if (pages > nseg) occupied += "...(" + std::to_string(pages - nseg) + " more pages, past any GPU's memory)";
  return occupied;
}

}  // namespace

std::string stats(const Snapshot& s) {
  std::string out = "Summary of segments >= " + format_size(kPageSize) + " in size\n";

  // sorted(..., key=(total_size, calc_active)) is stable, so equal keys keep file order.
  std::vector<int64_t> active(s.segments.size());
  for (size_t i = 0; i < s.segments.size(); ++i) active[i] = calc_active(s, s.segments[i]);
  std::vector<size_t> order(s.segments.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (s.segments[a].total_size != s.segments[b].total_size)
      return s.segments[a].total_size < s.segments[b].total_size;
    return active[a] < active[b];
  });

  int64_t total_reserved = 0, total_allocated = 0, free_external = 0, free_internal = 0;
  std::vector<Range> ranges;
  for (size_t idx : order) {
    const Segment& seg = s.segments[idx];
    const auto total_size = static_cast<int64_t>(seg.total_size);
    total_reserved += total_size;
    int64_t seg_free_external = 0, seg_free_internal = 0, seg_allocated = 0, boffset = 0;
    ranges.clear();
    for (const Block& b : s.blocks_of(seg)) {
      const auto size = static_cast<int64_t>(b.size);
      if (b.state == BlockState::kActiveAllocated) {
        const auto allocated_size = static_cast<int64_t>(block_extra_size(s, b));
        ranges.push_back({boffset, allocated_size});
        seg_allocated += allocated_size;
        seg_free_internal += size - allocated_size;
      } else {
        seg_free_external += size;
      }
      boffset += size;
    }
    total_allocated += seg_allocated;
    free_external += seg_free_external;
    free_internal += seg_free_internal;

    const std::string body = segment_bar(total_size, ranges);
    if (total_size >= kPageSize) {
      out += '[' + body + "] " + format_size(total_size) + " allocated, " +
             report_free(seg_free_external, seg_free_internal) + " free";
      if (seg.stream != 0) out += " stream_" + py_int(seg.stream);
      out += '\n';
    }
  }
  out += "segments: " + std::to_string(s.segments.size()) + "\n";
  out += "total_reserved: " + format_size(total_reserved) + "\n";
  out += "total_allocated: " + format_size(total_allocated) + "\n";
  out += "total_free: " + report_free(free_external, free_internal) + "\n";
  out += "\nLegend:\n"
         "    [a     ] - a segment in the allocator\n"
         "     ^-- a page " + format_size(kPageSize) + " of memory in the segment\n"
         "    a-z: pages filled with a single block's content\n"
         "    ' ': page is completely free\n"
         "    *: page if completely full with multiple blocks\n"
         "    0-9: page is partially full with tensors of multiple blocks (9 == 90% full)\n"
         "    (X% internal) - of the free memory, X% is free because we rounded the size of the allocation.\n";
  return out;
}

}  // namespace allocscope::memviz

namespace allocscope::memviz {

std::string stats_notes(const Snapshot& s) {
  size_t bad = 0;
  uint64_t uncovered = 0;
  std::string first;
  for (size_t i = 0; i < s.segments.size(); ++i) {
    const Segment& seg = s.segments[i];
    uint64_t sum = 0;
    for (const Block& b : s.blocks_of(seg)) sum += b.size;
    if (sum == seg.total_size) continue;
    if (bad++ == 0)
      first = "segment " + std::to_string(i) + " (" + std::to_string(seg.total_size) + " bytes) has blocks of " +
              std::to_string(sum) + " bytes";
    uncovered += sum < seg.total_size ? seg.total_size - sum : sum - seg.total_size;
  }
  if (bad == 0) return "";
  // PyTorch's segsum asserts here ("Segment size mismatch"); the file was not written by PyTorch's allocator or was
  // edited. The bars above count the blocks there are.
  return "allocscope: note: " + std::to_string(bad) + " of " + std::to_string(s.segments.size()) +
         " segments' blocks do not add up to their total_size (" + std::to_string(uncovered) +
         " bytes differ; first: " + first + "); PyTorch's stats stops with an AssertionError on such a file\n";
}

}  // namespace allocscope::memviz
