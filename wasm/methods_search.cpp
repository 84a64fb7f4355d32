// Search support: the distinct frames as text (the page runs the user's regex over them, once per frame, not per
// event) and "which allocations match" as a per-row mask, by frame ids or by an address inside the block.
#include <algorithm>
#include <cstdlib>

#include "timeline_cache.h"

namespace allocscope::wasm {
namespace {

// The distinct user_metadata texts of the trace (torch.cuda.memory._set_memory_metadata, PyTorch 2.12+), in order
// of first appearance: the search matches them too, as the texts after the frames' (ids from frames.size() on).
std::vector<StringId> metadata_texts(const Snapshot& s) {
  std::vector<StringId> out;
  const SameOrColumn& um = s.events.user_metadata;
  if (um.uniform()) {
    if (um.size() && um[0] && !s.str(um[0]).empty()) out.push_back(um[0]);
    return out;
  }
  std::vector<uint8_t> seen;
  for (size_t row = 0; row < um.size(); ++row) {
    const StringId id = um[row];
    if (!id || s.str(id).empty()) continue;
    if (id >= seen.size()) seen.resize(id + 1, 0);
    if (!seen[id]) seen[id] = 1, out.push_back(id);
  }
  return out;
}

Answer frames(const Request&, std::span<Loaded* const> files) {
  const Snapshot& s = files[0]->snapshot;
  json out = json::array();
  for (const Frame& f : s.frames)
    out.push_back(std::string(s.str(f.filename)) + ":" + line_text(f) + ":" + std::string(s.str(f.name)));
  for (StringId id : metadata_texts(s)) out.push_back("user metadata: " + std::string(s.str(id)));
  Answer a;
  a.body = {{"frames", out}, {"metadata_from", s.frames.size()}};
  return a;
}

// {"device", "frames": [frame ids]} or {"device", "address": "0x..."} -> u8 mask over timeline rows.
Answer match_rows(const Request& r, std::span<Loaded* const> files) {
  DeviceTimeline* t = timeline_of(*files[0], r.i64("device"));
  if (!t) return Answer::error("no trace for that device");
  const DeviceLifetimes& lt = *t->lifetimes;
  const Snapshot& s = files[0]->snapshot;
  std::vector<uint8_t> mask(lt.count(), 0);
  uint64_t matches = 0;
  if (auto it = r.j.find("frames"); it != r.j.end() && it->is_array()) {
    std::vector<uint8_t> frame_hit(s.frames.size(), 0);
    const std::vector<StringId> metadata = metadata_texts(s);
    std::vector<StringId> metadata_hit;  // ids past the frames: user_metadata texts (frames' answer)
    for (const auto& v : *it) {
      if (!v.is_number_unsigned()) continue;
      const uint64_t id = v.get<uint64_t>();
      if (id < frame_hit.size()) frame_hit[id] = 1;
      else if (id - frame_hit.size() < metadata.size()) metadata_hit.push_back(metadata[id - frame_hit.size()]);
    }
    auto metadata_of = [&](uint32_t row) -> StringId {
      return lt.alloc_event[row] == kNoEvent ? 0 : s.events.user_metadata[lt.event_begin + lt.alloc_event[row]];
    };
    std::vector<int8_t> stack_hit(s.stacks.size(), -1);  // memo: stacks are shared by many rows
    for (uint32_t row = 0; row < lt.count(); ++row) {
      const StackId st = lt.stack[row];
      if (stack_hit[st] < 0) {
        auto fs = s.stack(st);
        stack_hit[st] = std::any_of(fs.begin(), fs.end(), [&](FrameId f) { return frame_hit[f] != 0; }) ? 1 : 0;
      }
      if (stack_hit[st] ||
          (!metadata_hit.empty() &&
           std::find(metadata_hit.begin(), metadata_hit.end(), metadata_of(row)) != metadata_hit.end()))
        mask[row] = 1, ++matches;
    }
  } else {
    const std::string text = r.str("address");
    char* end = nullptr;
    const uint64_t addr = std::strtoull(text.c_str(), &end, 16);
    if (text.empty() || (end && *end)) return Answer::error("address must be hexadecimal, like 0x7f3a00000000");
    for (uint32_t row = 0; row < lt.count(); ++row) {
      const uint64_t len = std::max<uint64_t>({lt.size[row], lt.block_size[row], 1});
      if (lt.addr[row] <= addr && addr < lt.addr[row] + len) mask[row] = 1, ++matches;
    }
  }
  Answer a;
  a.body = {{"matches", matches}, {"rows", lt.count()}};
  a.add<uint8_t>("mask", "u8", mask);
  t->mark = std::move(mask);  // later draws with "marks" keep these rows out of merged runs
  return a;
}

// Forgets the search marks of a device.
Answer clear_marks(const Request& r, std::span<Loaded* const> files) {
  if (DeviceTimeline* t = timeline_of(*files[0], r.i64("device"))) t->mark.clear();
  return Answer{};
}

const RegisterMethod r0({"clear_marks", clear_marks});
const RegisterMethod r1({"frames", frames});
const RegisterMethod r2({"match_rows", match_rows});

}  // namespace
}  // namespace allocscope::wasm
