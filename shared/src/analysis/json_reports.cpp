// JSON for the whole-file answers (OOM reports, diff, summary).
#include <algorithm>

#include "allocscope/diff.h"
#include "allocscope/oom.h"
#include "allocscope/outside.h"
#include "allocscope/summary.h"
#include "analysis/json_common.h"

namespace allocscope {

using json_detail::Json;

std::string to_json(const Snapshot& s, const Lifetimes& lifetimes, const std::vector<OomReport>& reports) {
  Json a = Json::array();
  const FrameFilter ff(s);
  for (const OomReport& o : reports) {
    Json top = Json::array();
    if (const DeviceLifetimes* lt = lifetimes.device(o.device)) {
      for (uint32_t i : o.top_rows) {
        Json row{{"addr", lt->addr[i]}, {"addr_hex", json_detail::hex(lt->addr[i])}, {"size", lt->size[i]},
                 {"site", json_detail::frame(s, ff.site(lt->stack[i]))}};
        json_detail::add_stack(row, s, lt->stack[i]);
        top.push_back(std::move(row));
      }
    }
    a.push_back({{"device", o.device},
                 {"event", o.event},
                 {"ooms_on_device", o.ooms_on_device},
                 {"time_us", o.time_us},
                 {"requested", o.requested},
                 {"device_free", o.device_free},
                 {"reserved", o.reserved},
                 {"allocated", o.allocated},
                 {"requested_live", o.requested_live},
                 {"cached_free", o.cached_free},
                 {"pending_free", o.pending_free},
                 {"largest_free_block", o.largest_free_block},
                 {"stream", o.stream},
                 {"usable_free", o.usable_free},
                 {"usable_largest_free_block", o.usable_largest_free_block},
                 {"free_other_streams", o.free_other_streams},
                 {"request_in_private_pool", o.request_in_private_pool},
                 {"free_other_mempools", o.free_other_mempools},
                 {"largest_free_other_mempool", o.largest_free_other_mempool},
                 {"driver_needed", o.driver_needed},
                 {"live_allocations", o.live_allocations},
                 {"fragmentation", o.fragmentation},
                 {"cause", std::string(oom_cause_name(o.cause))},
                 {"cause_sure", o.cause_sure},
                 {"advice", o.advice},
                 {"gpu_total", o.gpu.total_bytes},
                 {"gpu_class", o.gpu.label},
                 {"gpu_inferred", o.gpu.inferred},
                 {"gpu_given_too_small", o.gpu_given_too_small},
                 {"held_outside", o.held_outside},
                 {"expandable_segments", o.expandable_segments},
                 {"largest_live", std::move(top)}});
    if (o.has_outside) {
      Json owners = Json::array();
      for (const auto& [owner, bytes] : o.outside_by_owner)
        owners.push_back({{"owner", owner_name(owner)}, {"label", owner_label(owner)}, {"bytes", bytes}});
      a.back()["captured_outside"] = {{"bytes", o.captured_outside}, {"by_owner", std::move(owners)}};
    }
  }
  return json_detail::dump(a);
}

std::string to_json(const SnapshotDiff& d, uint32_t top) {
  Json only_a = Json::array(), only_b = Json::array(), stacks = Json::array();
  for (size_t k = 0; k < d.only_a_addr.size(); ++k) only_a.push_back({{"addr", d.only_a_addr[k]}, {"addr_hex", json_detail::hex(d.only_a_addr[k])}, {"size", d.only_a_size[k]}});
  for (size_t k = 0; k < d.only_b_addr.size(); ++k) only_b.push_back({{"addr", d.only_b_addr[k]}, {"addr_hex", json_detail::hex(d.only_b_addr[k])}, {"size", d.only_b_size[k]}});
  for (size_t k = 0; k < d.groups() && k < top; ++k) {
    stacks.push_back({{"delta", d.delta[k]}, {"bytes_a", d.bytes_a[k]}, {"bytes_b", d.bytes_b[k]},
                      {"count_a", d.count_a[k]}, {"count_b", d.count_b[k]}, {"site", d.site[k]}, {"stack", d.stack[k]}});
  }
  Json peaks_a = Json::array(), peaks_b = Json::array();
  auto traced = [](const std::vector<int64_t>& none, int64_t dev) {
    return std::find(none.begin(), none.end(), dev) == none.end();
  };
  for (const auto& [dev, bytes] : d.peaks_a)
    peaks_a.push_back({{"device", dev}, {"bytes", bytes}, {"traced", traced(d.no_trace_a, dev)}});
  for (const auto& [dev, bytes] : d.peaks_b)
    peaks_b.push_back({{"device", dev}, {"bytes", bytes}, {"traced", traced(d.no_trace_b, dev)}});
  Json peaks = {{"a", std::move(peaks_a)}, {"b", std::move(peaks_b)}};
  return json_detail::dump(Json{{"peak_allocated", std::move(peaks)}, {"reserved_a", d.reserved_a}, {"reserved_b", d.reserved_b},
                                {"live_a", d.live_a},         {"live_b", d.live_b},
                                {"segments_only_a", std::move(only_a)}, {"segments_only_b", std::move(only_b)},
                                {"stacks", std::move(stacks)}, {"stack_groups", d.groups()}});
}

std::string to_json(const Snapshot& s, const Summary& sum) {
  Json devices = Json::array();
  for (const DeviceSummary& d : sum.devices) {
    Json sites = Json::array();
    for (size_t k = 0; k < d.top_site.size(); ++k)
      sites.push_back({{"site", json_detail::frame(s, d.top_site[k])}, {"bytes", d.top_site_bytes[k]}});
    Json owners = Json::array();
    for (const auto& [owner, bytes] : d.owners_at_peak)
      owners.push_back({{"owner", owner_name(owner)}, {"label", owner_label(owner)}, {"bytes", bytes}});
    devices.push_back({{"device", d.device},
                       {"events", d.events},
                       {"first_us", d.first_us},
                       {"last_us", d.last_us},
                       {"allocations", d.allocations},
                       {"frees_without_alloc", d.frees_without_alloc},
                       // Steps as the file numbers them, also when a window of it was loaded.
                       {"peak_allocated", {{"bytes", d.peak_allocated}, {"step", d.step_offset + d.peak_allocated_step}}},
                       {"peak_reserved", {{"bytes", d.peak_reserved}, {"step", d.step_offset + d.peak_reserved_step}}},
                       {"window", d.windowed ? Json{{"first_step", d.first_step},
                                                    {"last_step", d.last_step},
                                                    {"file_events", d.file_events}}
                                             : Json(nullptr)},
                       {"reserved_known", d.reserved_known()},
                       {"final", {{"reserved", d.final_reserved}, {"allocated", d.final_allocated}, {"pending_free", d.final_pending_free},
                                  {"largest_free_block", d.final_largest_free}, {"fragmentation", d.fragmentation},
                                  {"free_in_private_pools", d.final_free_private},
                                  {"largest_free_block_outside_private_pools", d.final_largest_free_shared}}},
                       {"iterations", d.iterations},
                       {"forward_repeats", d.forward_repeats},
                       {"setup_repeats", d.setup_repeats},
                       {"ooms", d.ooms},
                       {"leak_suspected", d.leak_suspected},
                       {"leak_site", d.leak_site},
                       {"top_sites", std::move(sites)},
                       {"owners_at_peak", std::move(owners)}});
    if (s.outside) {
      Json osites = Json::array();
      for (size_t k = 0; k < d.outside_sites_at_peak.size(); ++k) {
        const auto& [site, bytes] = d.outside_sites_at_peak[k];
        const uint32_t owners = k < d.outside_site_owners.size() ? d.outside_site_owners[k] : 0;
        osites.push_back({{"site", json_detail::frame(*s.outside, site)},
                          {"bytes", bytes},
                          {"owners", owner_names(owners)},
                          {"owners_label", owner_labels(owners)}});
      }
      devices.back()["outside"] = {{"at_peak", d.outside_at_peak}, {"peak", d.outside_peak},
                                   {"sites_at_peak", std::move(osites)}};
    }
  }
  return json_detail::dump(Json{{"segments", sum.segments}, {"blocks", sum.blocks}, {"events", sum.events},
                                {"source_bytes", sum.source_bytes}, {"devices", std::move(devices)},
                                {"warnings", sum.warnings}});
}

}  // namespace allocscope
