// Frozen recorder state -> allocscope::Snapshot (see snapshot_builder.h). Work is proportional to distinct stacks
// and addresses, not to events, except for one pass that copies event columns.
#include "snapshot_builder.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <tuple>
#include <unordered_map>

#include "python_frames.h"
#include "symbolizer.h"

namespace allocscope::capture {
namespace {

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
  return buf;
}

std::string basename_of(const std::string& p) {
  const size_t s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}


class Builder {
 public:
  Builder(const Frozen& f, Snapshot* s) : f_(f), s_(*s) {}

  void run(BuildStats* stats) {
    stack_map_.assign(f_.stacks.size(), UINT32_MAX);
    stack_map_[0] = 0;
    events();
    segments();
    annotations();
    windows();
    settings();
    if (stats) {
      stats->distinct_addresses = frame_of_ip_.size();
      stats->distinct_frames = s_.frames.size();
    }
  }

 private:
  FrameId frame_for(uintptr_t ip) {
    auto it = frame_of_ip_.find(ip);
    if (it != frame_of_ip_.end()) return it->second;
    Frame fr;
    if (PythonFrame py; resolve_python_frame(ip, &py)) {
      // As PyTorch's recorder writes a Python frame: co_filename, co_name and the line being executed.
      fr.name = s_.strings.intern(py.name);
      fr.filename = s_.strings.intern(py.filename);
      fr.line = py.line;
      auto [fit, inserted] = frame_ids_.emplace(std::make_tuple(fr.name, fr.filename, fr.line),
                                                static_cast<FrameId>(s_.frames.size()));
      if (inserted) s_.frames.push_back(fr);
      frame_of_ip_.emplace(ip, fit->second);
      return fit->second;
    }
    const Symbol sym = symbolizer_.resolve(ip);
    const std::string module = sym.module >= 0 ? symbolizer_.modules()[sym.module].path : std::string("??");
    fr.name = s_.strings.intern(sym.function.empty() ? basename_of(module) + "+" + hex(sym.offset) : sym.function);
    fr.filename = s_.strings.intern(sym.file.empty() ? module : sym.file);
    fr.line = sym.line;
    // Several return addresses inside one function share one frame, so views aggregate by function.
    auto key = std::make_tuple(fr.name, fr.filename, fr.line);
    auto [fit, inserted] = frame_ids_.emplace(key, static_cast<FrameId>(s_.frames.size()));
    if (inserted) s_.frames.push_back(fr);
    frame_of_ip_.emplace(ip, fit->second);
    return fit->second;
  }

  StackId stack_for(uint32_t raw) {
    if (raw >= stack_map_.size()) return 0;
    if (stack_map_[raw] != UINT32_MAX) return stack_map_[raw];
    std::vector<FrameId> frames;
    for (uintptr_t ip : f_.stacks.get(raw)) frames.push_back(frame_for(ip));
    return stack_map_[raw] = s_.stacks.intern(frames);
  }

  StringId metadata_for(Api api, uint32_t context, uint64_t pool, uint32_t path) {
    const auto key = std::make_tuple(static_cast<int>(api), context, pool, path);
    auto it = meta_.find(key);
    if (it != meta_.end()) return it->second;
    std::string m = std::string("api=") + api_name(api);
    if (context) m += " ctx=" + std::to_string(context);
    if (pool) m += " pool=" + hex(pool);
    if (path && path < f_.strings.size()) m += " nvtx=" + f_.strings[path];
    const StringId id = s_.strings.intern(m);
    meta_.emplace(key, id);
    return id;
  }

  void events() {
    int max_dev = 0;
    for (const RawEvent& e : f_.events) max_dev = std::max<int>(max_dev, e.device);
    for (const LiveEntry& e : f_.live) max_dev = std::max<int>(max_dev, e.device);
    EventColumns& c = s_.events;
    const size_t n = f_.events.size();
    c.action.reserve(n); c.addr.reserve(n); c.size.reserve(n); c.stream.reserve(n); c.time_us.reserve(n);
    c.stack.reserve(n); c.compile_context.reserve(n); c.user_metadata.reserve(n);
    // device_traces is indexed by ordinal: one (maybe empty) list per device up to the highest seen.
    for (int d = 0; d <= max_dev; ++d) {
      DeviceTrace dt;
      dt.device = d;
      dt.begin = static_cast<uint32_t>(c.size_rows());
      for (const RawEvent& e : f_.events) {
        if (e.device != d) continue;
        c.action.push_back(e.action);
        c.addr.push_back(e.addr);
        c.size.push_back(e.size);
        c.stream.push_back(e.stream);
        c.time_us.push_back(e.time_us);
        c.stack.push_back(stack_for(e.stack));
        c.compile_context.push_back(0);
        c.user_metadata.push_back(metadata_for(e.api, e.context, e.pool, e.path));
      }
      dt.end = static_cast<uint32_t>(c.size_rows());
      s_.devices.push_back(dt);
    }
    s_.has_device_traces = true;
  }

  void segments() {
    std::vector<LiveEntry> live = f_.live;
    std::sort(live.begin(), live.end(), [](const LiveEntry& a, const LiveEntry& b) {
      return std::tie(a.device, a.addr) < std::tie(b.device, b.addr);
    });
    const StringId large = s_.strings.intern("large");
    const StringId small = s_.strings.intern("small");
    for (const LiveEntry& e : live) {
      Segment seg;
      seg.device = e.device;
      seg.address = e.addr;
      seg.total_size = seg.allocated_size = seg.active_size = seg.requested_size = e.size;
      seg.stream = e.stream;
      seg.segment_type = e.size <= (1u << 20) ? small : large;
      seg.is_expandable = e.kind == SegmentKind::kMapped;
      seg.stack = stack_for(e.stack);
      seg.first_block = static_cast<uint32_t>(s_.blocks.size());
      seg.num_blocks = 1;
      Block b;
      b.address = e.addr;
      b.size = b.requested_size = e.size;
      b.state = BlockState::kActiveAllocated;
      b.stack = seg.stack;
      s_.blocks.push_back(b);
      s_.segments.push_back(seg);
    }
  }

  void annotations() {
    for (const RawAnnotation& a : f_.annotations) {
      Annotation out;
      out.start = a.start;
      out.name = s_.strings.intern(a.name < f_.strings.size() ? f_.strings[a.name] : std::string());
      out.device = a.device;
      out.time_us = a.time_us;
      s_.annotations.push_back(out);
    }
  }

  void windows() {
    for (const RawWindow& w : f_.windows) {
      LentWindow out;
      out.start_us = w.start_us;
      out.end_us = w.end_us;
      out.kind = s_.strings.intern(w.kind < f_.strings.size() ? f_.strings[w.kind] : std::string());
      out.stack = stack_for(w.stack);
      if (out.stack) s_.lent_windows.push_back(out);
    }
  }

  static Setting str_setting(std::string key, std::string v) {
    Setting st;
    st.key = std::move(key);
    st.kind = Setting::Kind::kStr;
    st.s = std::move(v);
    return st;
  }
  static Setting int_setting(std::string key, int64_t v) {
    Setting st;
    st.key = std::move(key);
    st.kind = Setting::Kind::kInt;
    st.i = v;
    return st;
  }

  // Facts about the capture, under one key PyTorch's tools show verbatim in their settings view.
  void settings() {
    Setting cap;
    cap.key = "allocscope_capture";
    cap.kind = Setting::Kind::kDict;
    cap.children.push_back(str_setting("version", "0.1.0"));
    cap.children.push_back(int_setting("max_entries", static_cast<int64_t>(f_.options.max_entries)));
    const StackMode mode = f_.options.stacks;
    cap.children.push_back(str_setting("stacks", mode == StackMode::kPython ? "python"
                                                 : mode == StackMode::kNative ? "native" : "none"));
    // Whether Python frames were read in this process, and if not why.
    if (mode == StackMode::kPython) cap.children.push_back(str_setting("python_frames", python_frames_status()));
    cap.children.push_back(int_setting("recorded_events", static_cast<int64_t>(f_.recorded)));
    cap.children.push_back(int_setting("dropped_events", static_cast<int64_t>(f_.dropped)));
    cap.children.push_back(int_setting("pool_trims", static_cast<int64_t>(f_.pool_trims)));
    // The module map: frames name modules by path; the ranges let a reader map raw addresses back.
    Setting mods;
    mods.key = "modules";
    mods.kind = Setting::Kind::kList;
    for (const Module& m : symbolizer_.modules()) {
      if (m.path.empty()) continue;
      mods.children.push_back(str_setting("", m.path + " " + hex(m.lo) + "-" + hex(m.hi)));
    }
    cap.children.push_back(std::move(mods));
    // Live driver objects at dump time, oldest first.
    std::vector<HandleInfo> hs = f_.handles;
    std::sort(hs.begin(), hs.end(), [](const HandleInfo& a, const HandleInfo& b) {
      return std::tie(a.time_us, a.id) < std::tie(b.time_us, b.id);
    });
    const struct { HandleKind kind; const char* key; } kinds[] = {{HandleKind::kStream, "streams"},
                                                                  {HandleKind::kPool, "memory_pools"},
                                                                  {HandleKind::kReservation, "va_reservations"},
                                                                  {HandleKind::kPhysical, "physical_handles"},
                                                                  {HandleKind::kImported, "imported_handles"}};
    for (const auto& k : kinds) {
      Setting list;
      list.key = k.key;
      list.kind = Setting::Kind::kList;
      for (const HandleInfo& h : hs) {
        if (h.kind != k.kind) continue;
        std::string t = hex(h.id);
        if (h.size) t += " size=" + std::to_string(h.size);
        t += " device=" + std::to_string(h.device);
        if (h.context) t += " ctx=" + std::to_string(h.context);
        if (h.trims) {
          t += " trims=" + std::to_string(h.trims) + " reserved_after_last_trim=" +
               (h.reserved_after_trim == kUnknownBytes ? std::string("?") : std::to_string(h.reserved_after_trim));
        }
        list.children.push_back(str_setting("", t));
      }
      cap.children.push_back(std::move(list));
    }
    s_.allocator_settings.push_back(std::move(cap));
  }

  const Frozen& f_;
  Snapshot& s_;
  Symbolizer symbolizer_;
  std::vector<StackId> stack_map_;
  std::unordered_map<uintptr_t, FrameId> frame_of_ip_;
  std::map<std::tuple<StringId, StringId, int64_t>, FrameId> frame_ids_;
  std::map<std::tuple<int, uint32_t, uint64_t, uint32_t>, StringId> meta_;
};

}  // namespace

Snapshot build_snapshot(const Frozen& frozen, BuildStats* stats) {
  Snapshot s;
  Builder(frozen, &s).run(stats);
  return s;
}

}  // namespace allocscope::capture
