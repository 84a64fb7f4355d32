// JSON for the per-device answers (peak, categories, leaks): small documents the viewer and scripts read.
#include "allocscope/categories.h"
#include "allocscope/leaks.h"
#include "allocscope/peak.h"
#include "allocscope/timeline.h"
#include "analysis/json_common.h"

namespace allocscope {

using json_detail::Json;

namespace {

Json row(const Snapshot& s, const FrameFilter& ff, const DeviceLifetimes& lt, uint32_t i) {
  // Steps as the file numbers them, also when a window of it was loaded. An allocation kept from before the window
  // (alive at its start) or from after it has no step of the file in the model: its step is null and
  // born_before_window / born_after_window / freed_after_window say which.
  const uint32_t birth = lt.birth_step(i), death = lt.death_step(i);
  const bool freed = lt.free_event[i] != kNoEvent;
  const bool born_before = lt.windowed() && birth > 0 && birth <= lt.window_first();
  const bool born_after = lt.windowed() && birth > lt.window_last();
  const bool freed_after = lt.windowed() && freed && death > lt.window_last();
  const auto file_step = [&](uint32_t step) { return static_cast<int64_t>(step) + lt.step_offset(); };
  Json o{{"row", i},
         {"addr", lt.addr[i]},
         {"addr_hex", json_detail::hex(lt.addr[i])},
         {"size", lt.size[i]},
         {"stream", lt.stream[i]},
         {"birth_step", born_before || born_after ? Json(nullptr) : Json(birth == 0 ? 0 : file_step(birth))},
         {"death_step", !freed || freed_after ? Json(nullptr) : Json(file_step(death))},
         {"site", json_detail::frame(s, ff.site(lt.stack[i]))}};
  if (born_before) o["born_before_window"] = true;
  if (born_after) o["born_after_window"] = true;
  if (freed_after) o["freed_after_window"] = true;
  json_detail::add_stack(o, s, lt.stack[i]);
  return o;
}

Json categories_obj(const std::array<uint64_t, kCategoryCount>& bytes, const std::array<uint32_t, kCategoryCount>& count) {
  Json o = Json::object();
  for (int k = 0; k < kCategoryCount; ++k)
    o[std::string(category_name(static_cast<Category>(k)))] = Json{{"bytes", bytes[k]}, {"count", count[k]}};
  return o;
}

Json group(const Snapshot& s, const LeakGroup& g) {
  Json o{{"site", json_detail::frame(s, g.site)},
         {"category", std::string(category_name(g.category))},
         {"bytes_per_iteration", g.bytes_per_iteration},
         {"allocations", g.allocations},
         {"alive_count", g.alive_count},
         {"alive_bytes", g.alive_bytes}};
  json_detail::add_stack(o, s, g.stack);
  return o;
}

}  // namespace

std::string to_json(const Snapshot& s, const DeviceLifetimes& lt, const Peak& p, bool with_tree) {
  // Times only where the trace records them (null without a trace, or from PyTorch 2.0/2.1); `traced` false: the
  // numbers are the state the snapshot holds, not a peak over time.
  const bool timed = lt.timed(s);
  Json j{{"device", p.device},
         {"traced", lt.event_count > 0},
         // Steps as the file numbers them, also when only a window of it was loaded (Peak::step_offset).
         {"window", {p.step_offset + p.step_begin, p.step_offset + p.step_end}},
         {"allocated", {{"bytes", p.allocated_bytes}, {"step", p.step_offset + p.allocated_step},
                        {"time_us", timed ? Json(p.allocated_time_us) : Json(nullptr)},
                        {"reserved_then", p.reserved_at_allocated_peak}}},
         {"reserved", {{"bytes", p.reserved_bytes}, {"step", p.step_offset + p.reserved_step},
                       {"time_us", timed ? Json(p.reserved_time_us) : Json(nullptr)}}},
         {"alive", p.alive}};
  Json sites = Json::array();
  for (size_t k = 0; k < p.site.size(); ++k)
    sites.push_back({{"site", json_detail::frame(s, p.site[k])}, {"bytes", p.site_bytes[k]}, {"count", p.site_count[k]}});
  j["sites"] = std::move(sites);
  Json largest = Json::array();
  const FrameFilter ff(s);
  for (size_t k = 0; k < p.largest.size(); ++k) {
    largest.push_back(row(s, ff, lt, p.largest[k]));
    // The category the viewer's "largest allocations" table has a column for (it was always empty: an audit).
    if (k < p.largest_category.size()) largest.back()["category"] = std::string(category_name(p.largest_category[k]));
  }
  j["largest"] = std::move(largest);
  if (p.has_categories) j["categories"] = categories_obj(p.category_bytes, p.category_count);
  if (!p.owners.empty()) {
    Json owners = Json::array();
    for (const auto& [owner, bytes] : p.owners)
      owners.push_back({{"owner", owner_name(owner)}, {"label", owner_label(owner)}, {"bytes", bytes}});
    j["owners"] = std::move(owners);
  }
  if (with_tree) {
    // Frames are listed once; nodes refer to them by index into "frames" (-1 for the root).
    Json frames = Json::array();
    std::vector<int64_t> frame_index(s.frames.size(), -1);
    std::vector<int64_t> node_frame;
    for (FrameId f : p.tree.frame) {
      if (f >= s.frames.size()) {
        node_frame.push_back(-1);
        continue;
      }
      if (frame_index[f] < 0) {
        frame_index[f] = static_cast<int64_t>(frames.size());
        frames.push_back(FrameFilter::format(s, f));
      }
      node_frame.push_back(frame_index[f]);
    }
    std::vector<int64_t> parent;
    for (uint32_t x : p.tree.parent) parent.push_back(x == kNoRow ? -1 : static_cast<int64_t>(x));
    j["tree"] = Json{{"frames", std::move(frames)}, {"frame", node_frame},   {"parent", parent},
                     {"depth", p.tree.depth},        {"end", p.tree.end},      {"self_bytes", p.tree.self_bytes},
                     {"total_bytes", p.tree.total_bytes}, {"count", p.tree.count}};
  }
  return json_detail::dump(j);
}

std::string to_json(const Snapshot& s, const DeviceLifetimes& lt, const Categories& c, uint32_t step) {
  const CategoryTotals t = category_totals_at(lt, c, step);
  std::array<uint64_t, kCategoryCount> all_bytes{};
  std::array<uint32_t, kCategoryCount> all_count{};
  for (uint32_t i = 0; i < lt.count(); ++i) {
    all_bytes[static_cast<int>(c.category[i])] += lt.size[i];
    ++all_count[static_cast<int>(c.category[i])];
  }
  (void)s;
  return json_detail::dump(Json{{"device", lt.device},
                                {"step", step},
                                {"alive", categories_obj(t.bytes, t.count)},
                                {"all_allocations", categories_obj(all_bytes, all_count)}});
}

std::string to_json(const Snapshot& s, const LeakReport& r) {
  Json growing = Json::array(), held = Json::array(), released = Json::array();
  for (const LeakGroup& g : r.growing) growing.push_back(group(s, g));
  for (const LeakGroup& g : r.held) held.push_back(group(s, g));
  for (const LeakGroup& g : r.released) released.push_back(group(s, g));
  Json pools = Json::array();
  for (const PoolGrowth& p : r.pools_growing) {
    Json sites = Json::array();
    for (const LeakGroup& g : p.sites) sites.push_back(group(s, g));
    pools.push_back(Json{{"owner", std::string(owner_name(p.owner))},
                         {"reserved_at_boundary", p.reserved_at_boundary},
                         {"bytes_per_iteration", p.bytes_per_iteration},
                         {"warmup_boundaries", p.warmup_boundaries},
                         {"sites", std::move(sites)}});
  }
  return json_detail::dump(Json{{"device", r.device},
                                {"leak_suspected", r.leak_suspected()},
                                {"judged", r.judged()},
                                {"forward_only", r.forward_only},
                                {"setup_only", r.setup_only},
                                {"boundaries_needed", r.boundaries_needed},
                                {"iterations", {{"source", std::string(iteration_source_name(r.iterations.source))},
                                                {"marker", r.iterations.marker},
                                                {"boundaries", r.iterations.boundary}}},
                                {"total_at_boundary", r.total_at_boundary},
                                {"survivor_count", r.survivor_count},
                                {"survivor_bytes", r.survivor_bytes},
                                {"growing", std::move(growing)},
                                {"held", std::move(held)},
                                {"released", std::move(released)},
                                {"library_reservations_left_out", r.library_reservations_left_out},
                                {"pool_growth_suspected", r.pool_growth_suspected()},
                                {"pools_judged", r.pools_judged},
                                {"pools_growing", std::move(pools)}});
}

}  // namespace allocscope
