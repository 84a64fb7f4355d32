// Human text for a snapshot diff: the biggest live-memory differences by stack first, then the segment sets.
#include <cstdio>
#include <map>
#include <optional>
#include <vector>

#include "allocscope/diff.h"
#include "allocscope/frame_filter.h"
#include "analysis/frame_filter_text.h"

namespace allocscope {

using namespace text_detail;

std::string to_text(const SnapshotDiff& d, const std::string& a, const std::string& b, uint32_t top) {
  auto change = [](uint64_t x, uint64_t y) {
    return size(x) + " -> " + size(y) + " (" + signed_size(static_cast<int64_t>(y) - static_cast<int64_t>(x)) + ")";
  };
  std::string o = "A = " + printable(a) + ", B = " + printable(b) + "\n";
  // One device each (two ranks, two runs): their peaks compare whatever the ordinals. Otherwise device by device.
  if (d.peaks_a.size() == 1 && d.peaks_b.size() == 1) {
    o += "peak allocated: " + change(d.peaks_a[0].second, d.peaks_b[0].second);
    if (d.peaks_a[0].first != d.peaks_b[0].first)
      o += "   (cuda:" + std::to_string(d.peaks_a[0].first) + " in A, cuda:" + std::to_string(d.peaks_b[0].first) + " in B)";
    o += "\n";
  } else {
    // A device only one file has is said to be absent from the other, not "0.0B" there, which reads as measured
    // (an audit).
    std::map<int64_t, std::pair<std::optional<uint64_t>, std::optional<uint64_t>>> by_device;
    for (const auto& [dev, bytes] : d.peaks_a) by_device[dev].first = bytes;
    for (const auto& [dev, bytes] : d.peaks_b) by_device[dev].second = bytes;
    for (const auto& [dev, p] : by_device) {
      o += "peak allocated, cuda:" + std::to_string(dev) + ": ";
      if (p.first && p.second) o += change(*p.first, *p.second);
      else if (p.first) o += size(*p.first) + " -> (B has no cuda:" + std::to_string(dev) + ")";
      else o += "(A has no cuda:" + std::to_string(dev) + ") -> " + size(*p.second);
      o += "\n";
    }
  }
  for (const auto& [which, devs] : {std::pair{"A", &d.no_trace_a}, std::pair{"B", &d.no_trace_b}})
    for (int64_t dev : *devs)
      o += std::string("  (") + which + " has no trace on cuda:" + std::to_string(dev) +
           ": its number is the state its snapshot holds, not a peak)\n";
  o += "at the end: live " + change(d.live_a, d.live_b) + ", reserved " + size(d.reserved_a) + " -> " +
       size(d.reserved_b) + "   (live: requested bytes, all devices together)\n\n";
  o += "memory still allocated at the end, by stack, largest change first:\n";
  o += "  " + rpad("delta", 11) + "  " + rpad("A", 10) + "  " + rpad("B", 10) + "  count A->B  site\n";
  // Rows are stacks: two stacks that end at one line print alike, so such rows also name their nearest caller that
  // the other stacks ending there lack (an audit: six rows all read "pytorch_backend.py:195:allocate").
  auto frames_of = [](const std::string& stack) {
    std::vector<std::string> frames;
    for (size_t at = 0; at <= stack.size();) {
      size_t semi = stack.find(';', at);
      if (semi == std::string::npos) semi = stack.size();
      frames.push_back(stack.substr(at, semi - at));
      at = semi + 1;
    }
    return frames;
  };
  std::map<std::string, std::vector<size_t>> rows_at_site;
  for (size_t k = 0; k < d.groups() && k < top && d.delta[k] != 0; ++k) rows_at_site[d.site[k]].push_back(k);
  auto caller = [&](size_t k) -> std::string {
    const std::vector<size_t>& rows = rows_at_site[d.site[k]];
    if (rows.size() < 2) return "";
    const std::vector<std::string> mine = frames_of(d.stack[k]);
    size_t at = mine.size();
    for (size_t i = mine.size(); i-- > 0;)
      if (mine[i] == d.site[k]) { at = i; break; }
    // Outward from the site, the other rows that share every frame so far: the frames at which some of them drop
    // out, until none is left, tell this row apart from all of them (innermost first).
    std::vector<size_t> alike;
    for (size_t other : rows)
      if (other != k) alike.push_back(other);
    std::string via;
    for (size_t i = at; i-- > 0 && !alike.empty();) {
      const std::string frame = ";" + mine[i] + ";";
      const size_t before = alike.size();
      std::erase_if(alike, [&](size_t other) { return (";" + d.stack[other] + ";").find(frame) == std::string::npos; });
      if (alike.size() < before) via += (via.empty() ? "" : ", ") + mine[i];
    }
    return via.empty() ? "" : "  (via " + via + ")";
  };
  size_t shown = 0;
  for (size_t k = 0; k < d.groups() && shown < top; ++k) {
    if (d.delta[k] == 0) break;  // sorted by |delta|: the rest are equal in both
    o += "  " + rpad(signed_size(d.delta[k]), 11) + "  " + rpad(size(d.bytes_a[k]), 10) + "  " + rpad(size(d.bytes_b[k]), 10) +
         "  " + rpad(std::to_string(d.count_a[k]) + "->" + std::to_string(d.count_b[k]), 10) + "  " + d.site[k] +
         caller(k) + "\n";
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
