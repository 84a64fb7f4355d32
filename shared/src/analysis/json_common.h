// Private JSON helpers for the answers' to_json functions (kept out of the analysis code and public headers).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "allocscope/frame_filter.h"
#include "allocscope/memviz.h"
#include "allocscope/snapshot.h"

namespace allocscope::json_detail {

using Json = nlohmann::ordered_json;

// A frame's line for JSON: a number; its exact text above 2^63 (torch.compile's 2^64-1: JSON readers would round
// the number); null where the file had none.
inline Json line_json(const Frame& fr) {
  if (fr.line_none) return nullptr;
  return fr.line_unsigned ? Json(line_text(fr)) : Json(fr.line);
}

// A frame as {"name", "filename", "line", "text", "id"} (null for kNoFrame). The id is the frame's index in the
// file's frame table: the viewer marks search hits by it (its search ran over that table's texts).
inline Json frame(const Snapshot& s, FrameId f) {
  if (f >= s.frames.size()) return nullptr;
  const Frame& fr = s.frames[f];
  return Json{{"name", std::string(s.str(fr.name))},
              {"filename", std::string(s.str(fr.filename))},
              // A line above 2^63 (torch.compile's 2^64-1) as its exact text: JSON readers would round the number.
              {"line", line_json(fr)},
              {"text", FrameFilter::site_text(s, f)},
              {"id", f}};
}

// The frames a stack lists, innermost first (PyTorch's order), without the frames PyTorch's flame graphs hide (the
// unwinder's own, the interpreter loop, dispatcher glue), at most max_frames of them.
inline std::vector<FrameId> listed_frames(const Snapshot& s, StackId id, size_t max_frames = 64) {
  std::vector<FrameId> out;
  for (FrameId f : s.stack(id)) {
    if (out.size() >= max_frames) break;
    if (f >= s.frames.size()) continue;
    const Frame& fr = s.frames[f];
    if (memviz::frame_filter(s.str(fr.name), s.str(fr.filename))) out.push_back(f);
  }
  return out;
}

// A stack's listed frames as two keys of `o`: "frames", their "file:line:name" texts, and "frame_ids", their ids in
// the file's frame table (as in frame() above), in the same order.
inline void add_stack(Json& o, const Snapshot& s, StackId id) {
  Json texts = Json::array(), ids = Json::array();
  for (FrameId f : listed_frames(s, id)) {
    texts.push_back(FrameFilter::format(s, f));
    ids.push_back(f);
  }
  o["frames"] = std::move(texts);
  o["frame_ids"] = std::move(ids);
}

// An address as "0x..." text: JSON numbers above 2^53 lose precision in JavaScript, so every address also goes out
// as exact hex (the numeric field stays for scripts that read 64-bit integers).
inline std::string hex(uint64_t v) {
  static const char* digits = "0123456789abcdef";
  char buf[19] = "0x";
  int n = 0;
  char rev[16];
  do rev[n++] = digits[v & 15], v >>= 4;
  while (v);
  for (int i = 0; i < n; ++i) buf[2 + i] = rev[n - 1 - i];
  return std::string(buf, 2 + n);
}

// Strings from snapshots are UTF-8 already (the loader replaced invalid bytes); replace defensively anyway.
inline std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

}  // namespace allocscope::json_detail
