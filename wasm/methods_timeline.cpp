// Active Memory Timeline queries: "what to draw for this window and pixel grid" (typed arrays of rectangles and
// per-column totals), "what is under this pixel", and allocation details for hover/pin.
#include <algorithm>
#include <cmath>

#include "allocscope/memviz.h"
#include "timeline_cache.h"

namespace allocscope::wasm {

DeviceTimeline* timeline_of(Loaded& f, int64_t device) {
  static const size_t slot = new_cache_slot();
  auto* m = cached<std::map<int64_t, std::unique_ptr<DeviceTimeline>>>(f, slot);
  if (!m) m = store(f, slot, std::make_unique<std::map<int64_t, std::unique_ptr<DeviceTimeline>>>());
  auto it = m->find(device);
  if (it != m->end()) return it->second.get();
  const DeviceLifetimes* lt = lifetimes_of(f, device);
  if (!lt) return nullptr;
  auto t = std::make_unique<DeviceTimeline>();
  t->lifetimes = lt;
  t->layout = StackedTimeline::from_lifetimes(*lt);
  t->time = TimeAxis::for_device(f.snapshot, *lt);
  return (*m)[device] = std::move(t), (*m)[device].get();
}

json frames_json(const Snapshot& s, StackId stack) {
  json out = json::array();
  for (FrameId id : s.stack(stack)) {
    const Frame& fr = s.frames[id];
    // The id last: the page marks search hits by it (the search ran over the `frames` method's texts, by id).
    json one = {s.str(fr.name), s.str(fr.filename), fr.line_none ? json(nullptr) : fr.line_unsigned ? json(line_text(fr)) : json(fr.line), memviz::frame_filter(s.str(fr.name), s.str(fr.filename)), id};
    if (fr.fx) one.push_back(s.str(fr.fx));  // a torch.compile'd frame's FX node and original model code
    out.push_back(std::move(one));
  }
  return out;
}

static const char* origin_name(LifetimeOrigin o) {
  switch (o) {
    case LifetimeOrigin::kTraced: return "traced";
    case LifetimeOrigin::kFreedOnly: return "before trace (freed in it)";
    case LifetimeOrigin::kFinalState: return "before trace (alive at snapshot)";
  }
  return "";
}

json allocation_json(Loaded& f, const DeviceTimeline& t, uint32_t row, const Categories* categories) {
  const DeviceLifetimes& lt = *t.lifetimes;
  const Snapshot& s = f.snapshot;
  char hex[32];
  std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(lt.addr[row]));
  json j{{"row", row},
         {"address", hex},
         {"size", lt.size[row]},
         {"block_size", lt.block_size[row]},
         {"stream", lt.stream[row]},
         {"origin", origin_name(lt.origin[row])},
         {"birth_step", lt.birth_step(row)},
         {"death_step", lt.death_step(row)},
         {"steps", lt.steps()},
         {"birth_us", lt.step_time_us(s, lt.birth_step(row))},
         {"frames", frames_json(s, lt.stack[row])}};
  if (lt.free_event[row] != kNoEvent) j["death_us"] = lt.step_time_us(s, lt.death_step(row));
  // The frame the one site rule picks (frame_filter.h), by id: the card leads with it, marked, also when a
  // context='all' stack puts fifteen allocator frames before it.
  const FrameFilter& ff = frame_filter_of(f);
  if (const FrameId site = ff.site(lt.stack[row]); site != kNoFrame) {
    j["site"] = site;
    j["site_user"] = ff.has_user_frame(lt.stack[row]);
  }
  if (categories && row < categories->category.size()) {
    j["category"] = category_name(categories->category[row]);
    j["category_reason"] = category_reason_name(categories->reason[row]);
  }
  if (lt.alloc_event[row] != kNoEvent) {
    const uint32_t e = lt.event_begin + lt.alloc_event[row];
    if (s.events.compile_context[e]) j["compile_context"] = s.str(s.events.compile_context[e]);
    if (s.events.user_metadata[e]) j["user_metadata"] = s.str(s.events.user_metadata[e]);
  }
  return j;
}

namespace {

bool parse_request(const Request& r, const DeviceTimeline& t, DrawRequest* q) {
  q->axis = r.str("axis") == "time" ? DrawRequest::Axis::kTime : DrawRequest::Axis::kStep;
  q->time = &t.time;
  q->x_begin = r.f64("x0", 0);
  q->x_end = r.f64("x1", t.layout.steps());
  q->width_px = static_cast<uint32_t>(std::clamp<int64_t>(r.i64("width", 1000), 1, 16384));
  q->height_px = static_cast<uint32_t>(std::clamp<int64_t>(r.i64("height", 400), 1, 16384));
  q->y_min_bytes = r.f64("y_min", 0);
  q->bytes_per_px = r.f64("bytes_per_px", 0);
  return q->x_end > q->x_begin;
}

// The highest total among the states the window shows, so "fit" scales the y axis to what is on screen.
uint64_t window_max(const DeviceTimeline& t, const DrawRequest& q, uint32_t* at) {
  if (t.layout.steps() == 0) return *at = 0, 0;
  uint32_t a0, b0, s0, a1, b1, s1;
  t.layout.column_range(q, 0, &a0, &b0, &s0);
  t.layout.column_range(q, q.width_px - 1, &a1, &b1, &s1);
  *at = t.layout.argmax_total(a0, std::max(a0, b1));
  return t.layout.total(*at);
}

Answer draw(const Request& r, std::span<Loaded* const> files) {
  DeviceTimeline* t = timeline_of(*files[0], r.i64("device"));
  if (!t) return Answer::error("no trace for that device");
  DrawRequest q;
  if (!parse_request(r, *t, &q)) return Answer::error("empty window");
  uint32_t wmax_step = 0;
  const uint64_t wmax = window_max(*t, q, &wmax_step);
  if (!(q.bytes_per_px > 0)) q.bytes_per_px = std::max(1.0, static_cast<double>(wmax) * 1.06 / q.height_px);
  if (r.flag("marks") && t->mark.size() == t->layout.rows()) q.row_mark = t->mark.data();
  t->layout.draw(q, &t->scratch);
  const DrawResult& d = t->scratch;
  const uint32_t peak = t->lifetimes->peak_step();
  Answer a;
  a.body = {{"steps", t->layout.steps()},
            {"rows", t->layout.rows()},
            {"rects", d.rects()},
            {"bytes_per_px", q.bytes_per_px},
            {"y_min", q.y_min_bytes},
            {"window_max", wmax},
            {"window_max_step", wmax_step},
            {"peak_step", peak},
            {"peak_bytes", t->layout.total(peak)},
            {"time_first_us", t->time.first_us()},
            {"time_origin_us", time_origin_us(files[0]->snapshot, *t)},
            {"time_last_us", t->time.last_us()}};
  a.add<uint32_t>("column_step", "u32", d.column_step);
  a.add<double>("column_total", "f64", d.column_total);
  // Narrower than the model on the wire (17 bytes a rectangle, not 24): columns fit 16 bits (width <= 16384) and
  // the page asks a run's count only whether it is above 1. `allocscope view` sends a wide draw of 10M events,
  // ~130k rectangles, over HTTP, and those bytes were most of a pan/zoom step's wait.
  a.add_saturated<uint16_t>("x0", "u16", d.rect_x0);
  a.add_saturated<uint16_t>("x1", "u16", d.rect_x1);
  a.add<float>("y0", "f32", d.rect_y0);
  a.add<float>("y1", "f32", d.rect_y1);
  a.add<uint32_t>("row", "u32", d.rect_row);
  a.add_saturated<uint8_t>("count", "u8", d.rect_count);  // at most 255
  if (q.row_mark) a.add<uint8_t>("marked", "u8", d.rect_marked);
  if (r.flag("categories")) {  // per rectangle: the category of the allocation it shows (colour by category)
    const Categories* c = categories_of(*files[0], r.i64("device"));
    std::vector<uint8_t> cat(d.rects(), static_cast<uint8_t>(Category::kUnknown));
    if (c)
      for (size_t i = 0; i < d.rects(); ++i)
        if (d.rect_row[i] < c->category.size()) cat[i] = static_cast<uint8_t>(c->category[d.rect_row[i]]);
    a.add<uint8_t>("category", "u8", cat);
  }
  return a;
}

Answer hit(const Request& r, std::span<Loaded* const> files) {
  DeviceTimeline* t = timeline_of(*files[0], r.i64("device"));
  if (!t) return Answer::error("no trace for that device");
  DrawRequest q;
  if (!parse_request(r, *t, &q)) return Answer::error("empty window");
  const uint32_t column = static_cast<uint32_t>(std::clamp<int64_t>(r.i64("column"), 0, q.width_px - 1));
  uint32_t first, last, shown;
  t->layout.column_range(q, column, &first, &last, &shown);
  Answer a;
  a.body = {{"step", shown}, {"first_step", first}, {"last_step", last}, {"total", t->layout.total(shown)},
            {"time_us", t->lifetimes->step_time_us(files[0]->snapshot, shown)}};
  const uint32_t row = t->layout.hit_test_px(q, column, r.f64("y_px"));
  if (row != kNoRow)
    a.body["allocation"] = allocation_json(*files[0], *t, row, categories_of(*files[0], r.i64("device")));
  return a;
}

Answer allocation(const Request& r, std::span<Loaded* const> files) {
  DeviceTimeline* t = timeline_of(*files[0], r.i64("device"));
  if (!t) return Answer::error("no trace for that device");
  const int64_t row = r.i64("row", -1);
  if (row < 0 || row >= t->layout.rows()) return Answer::error("no such allocation");
  Answer a;
  a.body = allocation_json(*files[0], *t, static_cast<uint32_t>(row), categories_of(*files[0], r.i64("device")));
  return a;
}

// Maps times to steps and back for the page (annotations, axis labels): {"times": [...]} -> steps; {"steps"} -> us.
Answer axis(const Request& r, std::span<Loaded* const> files) {
  DeviceTimeline* t = timeline_of(*files[0], r.i64("device"));
  if (!t) return Answer::error("no trace for that device");
  json steps = json::array(), times = json::array();
  if (auto it = r.j.find("times"); it != r.j.end() && it->is_array())
    for (const auto& v : *it) steps.push_back(v.is_number() ? t->time.events_before(v.get<double>()) : 0);
  if (auto it = r.j.find("steps"); it != r.j.end() && it->is_array())
    for (const auto& v : *it)
      times.push_back(t->lifetimes->step_time_us(files[0]->snapshot,
                                                  v.is_number_unsigned() ? v.get<uint32_t>() : 0));
  Answer a;
  a.body = {{"steps", steps}, {"times", times}, {"time_first_us", t->time.first_us()},
            {"time_origin_us", time_origin_us(files[0]->snapshot, *t)}, {"time_last_us", t->time.last_us()},
            {"step_count", t->layout.steps()}};
  return a;
}

// A selected allocation's band over its whole life (its bottom only drops, as bands below it are freed), so the page
// can outline it at any zoom even where it merges into sub-pixel runs.
Answer outline(const Request& r, std::span<Loaded* const> files) {
  DeviceTimeline* t = timeline_of(*files[0], r.i64("device"));
  if (!t) return Answer::error("no trace for that device");
  const int64_t row = r.i64("row", -1);
  if (row < 0 || row >= t->layout.rows()) return Answer::error("no such allocation");
  std::vector<uint32_t> steps;
  std::vector<uint64_t> offsets;
  t->layout.band_outline(static_cast<uint32_t>(row), &steps, &offsets);
  std::vector<double> s(steps.begin(), steps.end()), o(offsets.begin(), offsets.end()), us(steps.size());
  for (size_t i = 0; i < steps.size(); ++i) us[i] = static_cast<double>(t->lifetimes->step_time_us(files[0]->snapshot, steps[i]));
  Answer a;
  a.body = {{"row", row}, {"size", t->layout.size(static_cast<uint32_t>(row))}};
  a.add<double>("steps", "f64", s);
  a.add<double>("times", "f64", us);
  a.add<double>("offsets", "f64", o);
  return a;
}

const RegisterMethod r0({"band_outline", outline});
const RegisterMethod r1({"timeline_draw", draw});
const RegisterMethod r2({"timeline_hit", hit});
const RegisterMethod r3({"allocation", allocation});
const RegisterMethod r4({"axis", axis});

}  // namespace
}  // namespace allocscope::wasm
