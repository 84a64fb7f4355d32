// Human text for a snapshot diff: the biggest live-memory differences by stack first, then the segment sets.
#include <cstdio>
#include <map>

#include "allocscope/diff.h"
#include "analysis/frame_filter_text.h"

namespace allocscope {

using namespace text_detail;

std::string to_text(const SnapshotDiff& d, const std::string& a, const std::string& b, uint32_t top) {
  auto change = [](uint64_t x, uint64_t y) {
    return size(x) + " -> " + size(y) + " (" + signed_size(static_cast<int64_t>(y) - static_cast<int64_t>(x)) + ")";
  };
  std::string o = "A = " + a + ", B = " + b + "\n";
  // One device each (two ranks, two runs): their peaks compare whatever the ordinals. Otherwise device by device.
  if (d.peaks_a.size() == 1 && d.peaks_b.size() == 1) {
    o += "peak allocated: " + change(d.peaks_a[0].second, d.peaks_b[0].second);
    if (d.peaks_a[0].first != d.peaks_b[0].first)
      o += "   (cuda:" + std::to_string(d.peaks_a[0].first) + " in A, cuda:" + std::to_string(d.peaks_b[0].first) + " in B)";
    o += "\n";
  } else {
    std::map<int64_t, std::pair<uint64_t, uint64_t>> by_device;
    for (const auto& [dev, bytes] : d.peaks_a) by_device[dev].first = bytes;
    for (const auto& [dev, bytes] : d.peaks_b) by_device[dev].second = bytes;
    for (const auto& [dev, p] : by_device)
      o += "peak allocated, cuda:" + std::to_string(dev) + ": " + change(p.first, p.second) + "\n";
  }
  for (const auto& [which, devs] : {std::pair{"A", &d.no_trace_a}, std::pair{"B", &d.no_trace_b}})
    for (int64_t dev : *devs)
      o += std::string("  (") + which + " has no trace on cuda:" + std::to_string(dev) +
           ": its number is the state its snapshot holds, not a peak)\n";
  o += "at the end: live " + change(d.live_a, d.live_b) + ", reserved " + size(d.reserved_a) + " -> " +
       size(d.reserved_b) + "   (live: requested bytes, all devices together)\n\n";
  o += "memory still allocated at the end, by stack, largest change first:\n";
  o += "  " + rpad("delta", 11) + "  " + rpad("A", 10) + "  " + rpad("B", 10) + "  count A->B  site\n";
  size_t shown = 0;
  for (size_t k = 0; k < d.groups() && shown < top; ++k) {
    if (d.delta[k] == 0) break;  // sorted by |delta|: the rest are equal in both
    o += "  " + rpad(signed_size(d.delta[k]), 11) + "  " + rpad(size(d.bytes_a[k]), 10) + "  " + rpad(size(d.bytes_b[k]), 10) +
         "  " + rpad(std::to_string(d.count_a[k]) + "->" + std::to_string(d.count_b[k]), 10) + "  " + d.site[k] + "\n";
    ++shown;
  }
  size_t more = 0;
  for (size_t k = shown; k < d.groups(); ++k) more += d.delta[k] != 0;
  if (more) o += "  ... " + std::to_string(more) + " more stack(s) differ (--top N lists more)\n";
  if (shown == 0 && more == 0) o += "  (no difference in the memory still allocated at the end)\n";
  o += "\nsegments only in A: " + std::to_string(d.only_a_addr.size()) + ", only in B: " +
       std::to_string(d.only_b_addr.size()) + " (same address and size = same segment, as PyTorch's compare: " +
       "meaningful for two snapshots of one process)\n";
  return o;
}

}  // namespace allocscope
