// "facts" and "info": what a file holds, in the shape of PyTorch's own counts (tests/fixtures/expected/*.facts.json)
// plus what the page needs to set itself up (devices with events, time range, annotations, settings).
#include <malloc.h>
#include <algorithm>
#include <map>

#include "allocscope/loader.h"
#include "allocscope/ranks.h"
#include "methods.h"

namespace allocscope::wasm {
namespace {

json facts_of(const Snapshot& s) {
  // Counted per enum value first: a map lookup with a fresh std::string per event cost ~70 ms of the first paint on
  // 1M events in wasm.
  uint64_t per_action[kActionCount] = {};
  for (Action a : s.events.action) ++per_action[static_cast<int>(a)];
  std::map<std::string, uint64_t> actions;  // sorted like Python's json.dumps(sort_keys=True)
  for (int a = 0; a < kActionCount; ++a)
    if (per_action[a]) actions[std::string(action_name(static_cast<Action>(a)))] += per_action[a];
  uint64_t reserved = 0, allocated = 0, active_blocks = 0;
  for (const Segment& seg : s.segments) reserved += seg.total_size;
  // PyTorch's facts count the requested bytes of active_allocated blocks, not the segments' requested_size: the two
  // differ for blocks pending free and in files PyTorch did not write (pt25_verl_pending_free, synthetic_snapviewer).
  for (const Block& b : s.blocks)
    if (b.state == BlockState::kActiveAllocated) ++active_blocks, allocated += b.requested_size;
  json per_device = json::array();
  for (const DeviceTrace& d : s.devices) per_device.push_back(d.count());
  json j;
  j["actions"] = actions;
  j["active_blocks"] = active_blocks;
  j["segments"] = s.segments.size();
  j["total_allocated"] = allocated;
  j["total_reserved"] = reserved;
  j["trace_events_per_device"] = per_device;
  return j;
}

Answer facts(const Request&, std::span<Loaded* const> files) {
  Answer a;
  a.body = facts_of(files[0]->snapshot);
  return a;
}

// mallinfo's int fields wrap past 2 GiB: natively (`view --native`, a file too big for the tab) glibc has mallinfo2.
uint64_t heap_in_use() {
#ifdef __EMSCRIPTEN__
  return static_cast<uint64_t>(mallinfo().uordblks);
#else
  return static_cast<uint64_t>(mallinfo2().uordblks);
#endif
}

Answer info(const Request&, std::span<Loaded* const> files) {
  const Loaded& f = *files[0];
  const Snapshot& s = f.snapshot;
  const int64_t busiest = busiest_traced_device(s);  // the Diff view's device: the core's rule, as `ranks` uses
  json devices = json::array();
  for (size_t d = 0; d < s.devices.size(); ++d) {
    const DeviceTrace& t = s.devices[d];
    json dj{{"device", t.device}, {"events", t.count()}, {"timed", records_times(s.events, t.begin, t.end)},
            {"busiest", t.device == busiest}};
    // The device's oom events (their index in its trace, at most 64): the page opens an OOM file on the device that
    // ran out, marks them on the timeline and badges the OOM tab.
    json ooms = json::array();
    uint64_t oom_count = 0;
    for (uint32_t e = t.begin; e < t.end; ++e)
      if (s.events.action[e] == Action::kOom && oom_count++ < 64) ooms.push_back(e - t.begin);
    dj["ooms"] = oom_count;
    dj["oom_events"] = ooms;
    // `annotate` entries (newer PyTorch): their index and text (user_metadata), drawn as marks on the timeline.
    json notes = json::array();
    for (uint32_t e = t.begin; e < t.end && notes.size() < 256; ++e)
      if (s.events.action[e] == Action::kAnnotate)
        notes.push_back({e - t.begin, std::string(s.str(s.events.user_metadata[e]))});
    if (!notes.empty()) dj["annotate_events"] = notes;
    if (t.count()) {
      auto first = s.events.time_us.begin() + t.begin, last = s.events.time_us.begin() + t.end;
      dj["time_min_us"] = *std::min_element(first, last);
      dj["time_max_us"] = *std::max_element(first, last);
    }
    uint64_t reserved = 0, segs = 0;
    for (const Segment& seg : s.segments)
      if (seg.device == t.device) reserved += seg.total_size, ++segs;
    dj["segments"] = segs;
    dj["reserved_bytes"] = reserved;
    // A window of the file (?from=&to=, `view --from/--to`): steps first..last are the window's, the file's steps
    // `offset` more; the ones before `first` are the allocations alive at its start, past `last` what was kept from
    // after it (snapshot/trace_window.h). Times count from the file's first entry (time_origin_us), as the CLI's.
    if (!s.window.whole()) {
      const uint32_t n = t.count();
      dj["window"] = {{"first", t.before},
                      {"last", n - t.after},
                      {"offset", static_cast<int64_t>(t.first_step) - t.before},
                      {"file_events", t.events_in_file()},
                      {"time_origin_us", t.file_first_time_us}};
    }
    devices.push_back(dj);
  }
  // Devices that only appear in segments (no trace recorded, or a file that is a bare list of segments) still get a
  // selector entry, with their own segment count and reserved bytes.
  std::map<int64_t, std::pair<uint64_t, uint64_t>> untraced;  // device -> (segments, reserved)
  for (const Segment& seg : s.segments) {
    bool traced = std::any_of(s.devices.begin(), s.devices.end(),
                              [&](const DeviceTrace& t) { return t.device == seg.device; });
    if (!traced) ++untraced[seg.device].first, untraced[seg.device].second += seg.total_size;
  }
  for (const auto& [device, counts] : untraced)
    devices.push_back({{"device", device}, {"events", 0}, {"segments", counts.first}, {"reserved_bytes", counts.second}});
  json settings = json::array();
  for (const Setting& st : s.allocator_settings) settings.push_back({st.key, st.repr()});
  json unknown = json::array();
  for (const auto& [k, n] : s.unknown_keys) unknown.push_back({k, n});
  json annotations = json::array();
  for (const Annotation& an : s.annotations)
    annotations.push_back({{"start", an.start}, {"name", s.str(an.name)}, {"device", an.device},
                           {"time_us", an.time_us}});
  // Pinned host memory (PyTorch 2.14's record_pinned_host_memory), apart from every device's numbers.
  json host = nullptr;
  if (s.host) {
    uint64_t reserved = 0, allocated = 0;
    for (const Segment& seg : s.host->segments) {
      reserved += seg.total_size;
      for (const Block& b : s.host->blocks_of(seg))
        if (b.state == BlockState::kActiveAllocated) allocated += b.size;
    }
    host = {{"segments", s.host->segments.size()}, {"reserved_bytes", reserved}, {"allocated_bytes", allocated},
            {"events", s.host->events.size_rows()}};
  }
  Answer a;
  a.body = {{"name", f.name},
            {"host", host},
            // Set on a file's pinned host memory opened as its own (as_open_host): the file it came from.
            {"host_of", f.host_of.empty() ? json(nullptr) : json(f.host_of)},
            {"facts", facts_of(s)},
            {"devices", devices},
            {"has_device_traces", s.has_device_traces},
            {"allocator_settings", settings},
            {"unknown_keys", unknown},
            {"unknown_actions", s.unknown_action_names},
            {"annotations", annotations},
            // The window it was loaded with, as the user wrote it ("steps 4000-6000"); null when loaded whole.
            {"window", s.window.whole() ? json(nullptr) : json(describe_window(s.window))},
            {"source_bytes", s.source_bytes},
            {"model_bytes", s.memory_bytes()},
            // What the heap holds now (all files and caches), to see how much of the heap's size is live.
            {"heap_in_use", heap_in_use()},
            {"frames", s.frames.size()},
            {"stacks", s.stacks.size()}};
  return a;
}

const RegisterMethod r1({"facts", facts});
const RegisterMethod r2({"info", info});

}  // namespace
}  // namespace allocscope::wasm
