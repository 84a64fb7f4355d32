// A capture's mappings of other processes' memory, left out at load (peer_mappings.h).
#include "allocscope/peer_mappings.h"

#include <unordered_map>
#include <vector>

#include "allocscope/keep_allocations.h"

namespace allocscope {

namespace {
bool has(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }
}  // namespace

bool is_peer_import_frame(std::string_view name) {
  return name.rfind("nccl", 0) == 0 && has(name, "ImportShareableBuffer");
}

bool is_imported_mapping(std::string_view user_metadata) {
  return user_metadata.rfind("api=cuMemMap(imported)", 0) == 0;
}

PeerMappings drop_peer_mappings(Snapshot* s) {
  PeerMappings dropped;
  // Two marks: the capture's own (a cuMemMap of a handle it saw imported, in the metadata; captures since
  // 2026-11-26) and, for older captures, NCCL's importing function among the frames (needs NCCL's symbols).
  std::vector<uint8_t> import_frame(s->frames.size(), 0);
  bool any = false;
  for (size_t f = 0; f < s->frames.size(); ++f) any |= import_frame[f] = is_peer_import_frame(s->str(s->frames[f].name));
  std::vector<uint8_t> import_stack(s->stacks.size(), 0);
  if (any)
    for (uint32_t id = 0; id < s->stacks.size(); ++id)
      for (FrameId f : s->stack(id))
        if (f < import_frame.size() && import_frame[f]) import_stack[id] = 1;
  auto by_stack = [&](StackId st) { return st < import_stack.size() && import_stack[st]; };
  auto imported_row = [&](uint32_t row) {
    return by_stack(s->events.stack[row]) || is_imported_mapping(s->str(s->events.user_metadata[row]));
  };
  // Mappings still live at the end are also segments: they go by address (their stack may lack NCCL's symbols).
  std::unordered_map<uint64_t, bool> live_import;  // address -> mapped (imported) and not unmapped yet
  bool found = false;
  for (const DeviceTrace& d : s->devices)
    for (uint32_t row = d.begin; row < d.end; ++row) {
      const Action a = s->events.action[row];
      if (a == Action::kAlloc && imported_row(row)) ++dropped.count, dropped.bytes += s->events.size[row], found = true;
      if (a == Action::kSegmentMap && imported_row(row)) live_import[s->events.addr[row] ^ static_cast<uint64_t>(d.device)] = true;
      if (a == Action::kSegmentUnmap) live_import.erase(s->events.addr[row] ^ static_cast<uint64_t>(d.device));
    }
  if (!found) return dropped;
  Snapshot kept;
  keep_allocations(
      *s, [&](uint32_t row) { return !imported_row(row); },
      [&](const Segment& seg) {
        return !by_stack(segment_stack(*s, seg)) && !live_import.count(seg.address ^ static_cast<uint64_t>(seg.device));
      },
      &kept);
  s->events = std::move(kept.events);
  s->devices = std::move(kept.devices);
  s->segments = std::move(kept.segments);
  s->blocks = std::move(kept.blocks);
  return dropped;
}

bool is_capture(const Snapshot& s) {
  for (const Setting& st : s.allocator_settings)
    if (st.key == "allocscope_capture") return true;
  return false;
}

}  // namespace allocscope
