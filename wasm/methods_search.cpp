// Search support: the distinct frames as text (the page runs the user's regex over them, once per frame, not per
// event) and "which allocations match" as a per-row mask, by frame ids or by an address inside the block.
#include <algorithm>
#include <cstdlib>

#include "timeline_cache.h"

namespace allocscope::wasm {
namespace {

Answer frames(const Request&, std::span<Loaded* const> files) {
  const Snapshot& s = files[0]->snapshot;
  json out = json::array();
  for (const Frame& f : s.frames)
    out.push_back(std::string(s.str(f.filename)) + ":" + line_text(f) + ":" + std::string(s.str(f.name)));
  Answer a;
  a.body = {{"frames", out}};
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
    for (const auto& v : *it)
      if (v.is_number_unsigned() && v.get<uint64_t>() < frame_hit.size()) frame_hit[v.get<uint64_t>()] = 1;
    std::vector<int8_t> stack_hit(s.stacks.size(), -1);  // memo: stacks are shared by many rows
    for (uint32_t row = 0; row < lt.count(); ++row) {
      const StackId st = lt.stack[row];
      if (stack_hit[st] < 0) {
        auto fs = s.stack(st);
        stack_hit[st] = std::any_of(fs.begin(), fs.end(), [&](FrameId f) { return frame_hit[f] != 0; }) ? 1 : 0;
      }
      if (stack_hit[st]) mask[row] = 1, ++matches;
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
