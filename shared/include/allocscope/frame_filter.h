// Which frames say who allocated: PyTorch's flame-graph filter plus a "user code" test, precomputed per frame/stack.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "allocscope/snapshot.h"

namespace allocscope {

constexpr FrameId kNoFrame = std::numeric_limits<FrameId>::max();

// True for library frames: PyTorch and other installed packages (site-/dist-packages), the Python standard library,
// "<frozen ...>"/"<string>" pseudo-files, and C++ frames without a usable file ("??", "", .cpp/.h/.cu sources).
bool is_library_frame(std::string_view name, std::string_view filename);

// Built once per snapshot (cost: one pass over frames and distinct stacks); all queries are then O(1).
class FrameFilter {
 public:
  FrameFilter() = default;
  explicit FrameFilter(const Snapshot& s);

  // `_memory_viz._frame_filter`: false for unwinder, interpreter-loop and dispatcher-glue frames.
  bool visible(FrameId f) const { return f < visible_.size() && visible_[f]; }
  // Visible and not a library frame: the user's own code.
  bool user(FrameId f) const { return f < user_.size() && user_[f]; }
  // The allocation site: the innermost user frame of the stack, else its innermost visible frame; kNoFrame when the
  // stack is empty (e.g. allocations made by the autograd engine's threads when only Python stacks are recorded).
  FrameId site(StackId s) const { return s < site_.size() ? site_[s] : kNoFrame; }
  // True when the stack has at least one user frame (so `site` is user code).
  bool has_user_frame(StackId s) const { return s < site_user_.size() && site_user_[s]; }

  // "file.py:LINE:name" (PyTorch's `_frame_fmt`); "<no frames>" for kNoFrame.
  static std::string format(const Snapshot& s, FrameId f, bool full_filename = false);

 private:
  std::vector<uint8_t> visible_;
  std::vector<uint8_t> user_;
  std::vector<FrameId> site_;
  std::vector<uint8_t> site_user_;
};

}  // namespace allocscope
