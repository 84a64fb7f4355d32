// Human text for OOM reports: the request against free memory first, then the cause and what to do, then what was
// alive.
#include <map>

#include "allocscope/oom.h"
#include "allocscope/frame_filter.h"
#include "analysis/frame_filter_text.h"

namespace allocscope {

using namespace text_detail;

std::string to_text(const Snapshot& s, const Lifetimes& lifetimes, const std::vector<OomReport>& reports) {
  if (reports.empty()) return "no out-of-memory event in this snapshot\n";
  std::string o;
  const FrameFilter ff(s);
  std::map<int64_t, std::pair<uint32_t, uint32_t>> shown;  // device -> (reports here, oom events in all)
  for (const OomReport& r : reports) ++shown[r.device].first, shown[r.device].second = r.ooms_on_device;
  for (const auto& [device, n] : shown)
    if (n.first < n.second)
      o += "device " + std::to_string(device) + " has " + std::to_string(n.second) + " out-of-memory events: the first " +
           std::to_string(n.first / 2) + " and the last " + std::to_string(n.first - n.first / 2) +
           " are explained below\n";
  for (const OomReport& r : reports) {
    o += "device " + std::to_string(r.device) + ", event " + std::to_string(r.event) + ": OUT OF MEMORY asking for " +
         size(r.requested) + "; the driver had " + size(r.device_free) + " free\n";
    o += "  reserved by PyTorch  " + rpad(size(r.reserved), 10) + "\n";
    o += "  allocated            " + rpad(size(r.allocated), 10) + "  (" + std::to_string(r.live_allocations) +
         " live blocks, " + size(r.requested_live) + " requested)\n";
    o += "  cached free          " + rpad(size(r.cached_free), 10) + "  largest free block " + size(r.largest_free_block) + "\n";
    if (r.pending_free)
      o += "  pending free         " + rpad(size(r.pending_free), 10) +
           "  freed, waiting for another stream's queued work: neither allocated nor free\n";
    if (r.usable_free != r.cached_free)
      o += "  usable by it         " + rpad(size(r.usable_free), 10) + "  largest " + size(r.usable_largest_free_block) +
           " (its stream " + std::to_string(r.stream) + " and pool; " + size(r.free_other_streams) +
           " cached for other streams)\n";
    if (r.free_other_mempools)
      o += "  in other mem. pools  " + rpad(size(r.free_other_mempools), 10) + "  largest " +
           size(r.largest_free_other_mempool) +
           (r.request_in_private_pool ? " (pools other than this request's)"
                                      : " (private pools: CUDA graphs, MemPool; not this request's)") + "\n";
    if (r.gpu.total_bytes) {
      o += "  GPU                  " + rpad(size(r.gpu.total_bytes), 10) + "  " +
           (r.gpu.inferred ? "inferred: the smallest common GPU that holds these numbers (" + r.gpu.label +
                                 "); pass --gpu NAME if it is larger"
                           : r.gpu.label) + "\n";
      o += "  held outside PyTorch " + rpad(size(r.held_outside), 10) + "  GPU - reserved - driver free" +
           (r.gpu.inferred ? ", at least" : "") + "\n";
    }
    if (r.has_outside) {
      o += "  captured outside     " + rpad(size(r.captured_outside), 10) + "  allocated in this process outside "
           "PyTorch's allocator";
      for (size_t k = 0; k < r.outside_by_owner.size(); ++k)
        o += std::string(k ? ", " : ": ") + std::string(owner_label(r.outside_by_owner[k].first)) + " " +
             size(r.outside_by_owner[k].second);
      o += r.captured_outside < r.held_outside ? "; the rest is the CUDA context and other processes\n" : "\n";
    }
    if (r.expandable_segments) o += "  expandable_segments  on\n";
    o += "  => cause: " + std::string(oom_cause_name(r.cause)) + (r.cause_sure ? "" : " (unsure)") + ": " +
         r.advice + "\n";
    const DeviceLifetimes* lt = lifetimes.device(r.device);
    if (!lt || r.top_rows.empty()) continue;
    o += "  largest live allocations:\n";
    for (uint32_t i : r.top_rows) {
      o += "    " + rpad(size(lt->size[i]), 10) + "  " + FrameFilter::site_text(s, ff.site(lt->stack[i])) + "\n";
    }
  }
  return o;
}

}  // namespace allocscope
