// Human text for a snapshot diff: the biggest live-memory differences by stack first, then the segment sets.
#include <cstdio>

#include "allocscope/diff.h"
#include "analysis/frame_filter_text.h"

namespace allocscope {

using namespace text_detail;

std::string to_text(const SnapshotDiff& d, const std::string& a, const std::string& b, uint32_t top) {
  std::string o = "live " + size(d.live_a) + " -> " + size(d.live_b) + " (" +
                  signed_size(static_cast<int64_t>(d.live_b) - static_cast<int64_t>(d.live_a)) + "), reserved " +
                  size(d.reserved_a) + " -> " + size(d.reserved_b) + "   [A = " + a + ", B = " + b + "]\n\n";
  o += "live memory by stack, largest change first:\n";
  o += "  " + rpad("delta", 11) + "  " + rpad("A", 10) + "  " + rpad("B", 10) + "  count A->B  site\n";
  size_t shown = 0;
  for (size_t k = 0; k < d.groups() && shown < top; ++k) {
    if (d.delta[k] == 0) break;  // sorted by |delta|: the rest are equal in both
    o += "  " + rpad(signed_size(d.delta[k]), 11) + "  " + rpad(size(d.bytes_a[k]), 10) + "  " + rpad(size(d.bytes_b[k]), 10) +
         "  " + rpad(std::to_string(d.count_a[k]) + "->" + std::to_string(d.count_b[k]), 10) + "  " + d.site[k] + "\n";
    ++shown;
  }
  if (shown == 0) o += "  (no differences)\n";
  o += "\nsegments only in A: " + std::to_string(d.only_a_addr.size()) + ", only in B: " +
       std::to_string(d.only_b_addr.size()) + " (same address and size = same segment, as PyTorch's compare)\n";
  return o;
}

}  // namespace allocscope
