// Human text for peaks and categories: the answer (how much, when) first, then what was alive.
#include <algorithm>
#include <cstdio>
#include <unordered_map>

#include "allocscope/peak.h"

#include "analysis/frame_filter_text.h"

namespace allocscope {

using namespace text_detail;

std::string to_text(const Snapshot& s, const DeviceLifetimes& lt, const Peak& p) {
  std::string o;
  if (lt.event_count == 0) {
    // No trace: one state, the one the snapshot holds when it was taken, not a peak over time.
    o += "device " + std::to_string(p.device) + ": no trace (memory history was not recorded): the state the "
         "snapshot holds, not a peak: allocated " + size(p.allocated_bytes) + ", reserved " + size(p.reserved_bytes) +
         "\n";
  } else {
    const bool timed = lt.timed(s);  // else "+0.000 s" would read as measured
    // The exact bytes too: the viewer shows three digits (8.07 GiB) where this shows PyTorch's one decimal (8.1GiB);
    // both name the same byte count, so one can be checked against the other.
    const int64_t f = p.step_offset;  // steps as the file numbers them, when a window of it was loaded
    o += "device " + std::to_string(p.device) + ": peak allocated " + size(p.allocated_bytes) + " (" +
         std::to_string(p.allocated_bytes) + " bytes) at step " +
         std::to_string(f + p.allocated_step) + " (after " + std::to_string(f + p.allocated_step) + " of " +
         std::to_string(lt.windowed() ? lt.file_events : lt.event_count) + " events, " +
         (timed ? "+" + seconds(p.allocated_time_us - lt.origin_time_us(s)) : std::string("no times recorded")) + ")";
    o += ", reserved then " + size(p.reserved_at_allocated_peak) + "\n";
    o += "          peak reserved  " + size(p.reserved_bytes) + " at step " + std::to_string(f + p.reserved_step) + "\n";
  }
  if (p.step_begin != 0 || p.step_end != lt.event_count || lt.windowed())
    o += "          window: steps " + std::to_string(p.step_offset + p.step_begin) + ".." +
         std::to_string(p.step_offset + p.step_end) + "\n";
  o += "\nalive at the peak: " + std::to_string(p.alive) + " allocations\n";
  if (p.has_categories) {
    o += "by category:\n";
    for (int k = 0; k < kCategoryCount; ++k) {
      if (!p.category_count[k]) continue;
      o += "  " + rpad(size(p.category_bytes[k]), 10) + "  " + lpad(std::string(category_name(static_cast<Category>(k))), 16) +
           std::to_string(p.category_count[k]) + " allocations\n";
    }
  }
  if (!p.owners.empty()) {
    o += "by owner (who reserved it):\n";
    for (const auto& [owner, bytes] : p.owners) {
      o += "  ";  // appended piecewise: GCC 12 warns falsely (-Wrestrict) on "literal" + std::string here
      o += rpad(size(bytes), 10);
      o += "  ";
      o += owner_label(owner);
      o += "\n";
    }
  }
  o += "by site (deepest user frame):\n";
  for (size_t k = 0; k < p.site.size(); ++k)
    o += "  " + rpad(size(p.site_bytes[k]), 10) + "  " + rpad(std::to_string(p.site_count[k]), 6) + "x  " +
         FrameFilter::site_text(s, p.site[k]) + "\n";
  o += "largest allocations:\n";
  const FrameFilter ff(s);
  for (uint32_t i : p.largest)
    o += "  " + rpad(size(lt.size[i]), 10) + "  " + FrameFilter::site_text(s, ff.site(lt.stack[i])) + "\n";
  return o;
}

std::string to_text(const Snapshot& s, const DeviceLifetimes& lt, const Categories& c, const FrameFilter& ff,
                    uint32_t step) {
  const CategoryTotals t = category_totals_at(lt, c, step);
  uint64_t all = 0;
  for (uint64_t b : t.bytes) all += b;
  std::string o = "device " + std::to_string(lt.device) + " at step " + std::to_string(step) + ": " + size(all) +
                  " alive\n";
  // Bytes by site within each category, in one pass over the rows (every site counted: a category with more
  // than 64 sites once kept only its first 64, and could name the wrong three largest).
  std::unordered_map<FrameId, uint64_t> by_site[kCategoryCount];
  for (uint32_t i = 0; i < lt.count(); ++i)
    if (lt.alive_at(i, step)) by_site[static_cast<int>(c.category[i])][ff.site(lt.stack[i])] += lt.size[i];
  for (int k = 0; k < kCategoryCount; ++k) {
    if (!t.count[k]) continue;
    o += "  " + rpad(size(t.bytes[k]), 10) + "  " + lpad(std::string(category_name(static_cast<Category>(k))), 16) +
         rpad(std::to_string(t.count[k]), 6) + " allocations\n";
    // The three largest sites of this category, so a wrong guess is visible at once.
    std::vector<std::pair<uint64_t, FrameId>> sites;
    for (const auto& [f, bytes] : by_site[k]) sites.push_back({bytes, f});
    const size_t n = std::min<size_t>(3, sites.size());
    std::partial_sort(sites.begin(), sites.begin() + n, sites.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    for (size_t j = 0; j < n; ++j)
      o += "      " + rpad(size(sites[j].first), 10) + "  " + FrameFilter::site_text(s, sites[j].second) + "\n";
  }
  return o;
}

}  // namespace allocscope
