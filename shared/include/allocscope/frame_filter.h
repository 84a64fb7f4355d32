// Which frames say who allocated: PyTorch's flame-graph filter plus a "user code" test, precomputed per frame/stack.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "allocscope/snapshot.h"

namespace allocscope {

constexpr FrameId kNoFrame = std::numeric_limits<FrameId>::max();

// True for library frames: PyTorch and other installed packages (site-/dist-packages), the Python standard library,
// "<frozen ...>"/"<string>" pseudo-files, start-up hooks (sitecustomize.py, usercustomize.py: allocscope's
// bootstrap wraps torch.distributed's collectives there), and C++ frames without a usable file ("??", "", .cpp/.h/.cu sources,
// object files and shared libraries).
bool is_library_frame(std::string_view name, std::string_view filename);
// The interpreter's own C code: a CPython function (Py*, _Py*, pymain_*, pyrun_*) in a file that is unknown ("??",
// "": a symbol without a line table) or the interpreter's own (python3.12, libpython3.12.so). Such frames
// ("??:0:PyRun_StringFlags") run the job's Python code and say nothing of who allocated: FrameFilter does not show
// them, as PyTorch's filter does not show the interpreter loop.
bool is_interpreter_frame(std::string_view name, std::string_view filename);
// THE rule for "this frame is the user's code", used by every answer's site (FrameFilter), the viewer (through the
// core) and the capture's Python frame lending alike: a frame PyTorch's own tools show (memviz::frame_filter) that
// is not a library's.
bool is_user_frame(std::string_view name, std::string_view filename);

// A Windows path (C:\Users\me\venv\Lib\site-packages\torch\nn\modules\linear.py) with forward slashes and in lower
// case (Windows paths ignore case), in *buf; any other path unchanged. Every rule that tests a frame's directory
// ("/site-packages/", "/torch/nn/") reads the path through this, so snapshots recorded on Windows get the same answers.
std::string_view posix_path(std::string_view filename, std::string* buf);
// A string from a snapshot as text on one line: the characters escape_unsafe escapes (newline and tab included)
// written as \xNN or \uNNNN, so a name cannot drive the terminal an answer is printed on, reverse its text, nor
// forge lines of the answer. FrameFilter::format uses it; every snapshot string in a text answer goes through it.
std::string printable(std::string s);
// THE rule for characters that must not reach a reader raw, used by printable() and by the CLI's terminal filter
// alike: C0 controls (newline and tab kept when `keep_line_breaks`), DEL, C1 controls (U+0080-U+009F: some
// terminals read U+009B as CSI), the line and paragraph separators U+2028/U+2029, the bidirectional embeddings,
// overrides and isolates (U+202A-U+202E, U+2066-U+2069), and lone surrogates (U+D800-U+DFFF as WTF-8, which a
// snapshot's Python strings may hold). Appends in[0..n) to *out with those escaped; returns the bytes consumed,
// less than n only when !at_end and the input ends inside a sequence it must see whole.
size_t escape_unsafe(const unsigned char* in, size_t n, bool at_end, bool keep_line_breaks, std::string* out);

// The autograd node a C++ frame runs, for stacks recorded with C++ frames: "MmBackward0" for
// "torch::autograd::generated::MmBackward0::apply(...)", "AccumulateGrad" for its apply; "" for any other frame.
// Backward allocations are made on the engine's threads, whose stacks hold no Python frame: the node is the
// nearest thing to a user's line there is.
std::string_view autograd_node(std::string_view name);

// Built once per snapshot (cost: one pass over frames and distinct stacks); all queries are then O(1).
class FrameFilter {
 public:
  FrameFilter() = default;
  explicit FrameFilter(const Snapshot& s);

  // `_memory_viz._frame_filter`, and not is_interpreter_frame: false for unwinder, interpreter and dispatcher-glue
  // frames.
  bool visible(FrameId f) const { return f < visible_.size() && visible_[f]; }
  // Visible and not a library frame: the user's own code.
  bool user(FrameId f) const { return f < user_.size() && user_[f]; }
  // The allocation site, the one rule every answer uses (CLI, JSON, viewer): the innermost user frame of the stack;
  // else, on the autograd engine's threads, the backward node's apply frame; else the innermost visible frame that
  // is not the allocator's or the dispatcher's; kNoFrame when the stack is empty (e.g. allocations made by the
  // autograd engine's threads when only Python stacks are recorded, or before recording started).
  FrameId site(StackId s) const { return s < site_.size() ? site_[s] : kNoFrame; }
  // True when the stack has at least one user frame (so `site` is user code).
  bool has_user_frame(StackId s) const { return s < site_user_.size() && site_user_[s]; }

  // "file.py:LINE:name" (PyTorch's `_frame_fmt`); "<no frames>" for kNoFrame.
  static std::string format(const Snapshot& s, FrameId f, bool full_filename = false);
  // A site as answers print it: format(), except an autograd node's frame reads "backward: MmBackward0".
  static std::string site_text(const Snapshot& s, FrameId f, bool full_filename = false);
  // The stack's frames that `visible` keeps, innermost first, at most `max_frames`: printed stacks drop the
  // unwinder's, the interpreter loop's and the dispatcher glue's frames, as PyTorch's flame graphs do.
  std::vector<FrameId> shown_frames(const Snapshot& s, StackId id, size_t max_frames = SIZE_MAX) const;
  // The same, from the stack's site outward when it is user code: the user's line and its callers, not the
  // allocator's and the dispatcher's frames a C++ stack holds inside it (an audit: a leak's four printed frames were
  // DeviceCachingAllocator::malloc and the like, and the user's line, frame 15 of 22, never showed).
  std::vector<FrameId> frames_from_site(const Snapshot& s, StackId id, size_t max_frames = SIZE_MAX) const;

 private:
  std::vector<uint8_t> visible_;
  std::vector<uint8_t> user_;
  std::vector<FrameId> site_;
  std::vector<uint8_t> site_user_;
};

}  // namespace allocscope
