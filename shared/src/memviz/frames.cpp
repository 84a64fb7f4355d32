// Frame filtering and formatting as `_memory_viz.py` does it for flame graphs (`_frame_filter`, `_frame_fmt`).
#include "memviz/frames.h"

#include <string_view>

#include "allocscope/memviz.h"

namespace allocscope::memviz {

bool frame_filter(std::string_view name, std::string_view filename) {
  // The same substrings, in the same order, as PyTorch's `_frame_filter`: the unwinder, process start-up, the
  // CPython interpreter loop and the dispatcher's generated glue say nothing about who allocated.
  static constexpr std::string_view kOmitFunctions[] = {
      "unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp", "_start", "__libc_start_main",
      "PyEval_",        "PyObject_",                 "PyFunction_",
  };
  static constexpr std::string_view kOmitFilenames[] = {
      "core/boxing",           "/Register",       "/Redispatch",   "pythonrun.c", "Modules/main.c",
      "Objects/call.c",        "Objects/methodobject.c", "pycore_ceval.h", "ceval.c",   "cpython/abstract.h",
  };
  for (std::string_view of : kOmitFunctions)
    if (name.find(of) != std::string_view::npos) return false;
  for (std::string_view of : kOmitFilenames)
    if (filename.find(of) != std::string_view::npos) return false;
  return true;
}

std::string frame_fmt(const Snapshot& s, const Frame& f, bool full_filename) {
  std::string_view fname = s.str(f.filename);
  if (!full_filename) {
    const size_t slash = fname.rfind('/');
    if (slash != std::string_view::npos) fname = fname.substr(slash + 1);
  }
  std::string out(fname);
  out += ':';
  out += line_text(f);
  out += ':';
  out += s.str(f.name);
  return out;
}

StackFormatter::StackFormatter(const Snapshot& s)
    : s_(s),
      frame_state_(s.frames.size(), 0),
      frame_text_(s.frames.size()),
      stack_done_(s.stacks.size(), 0),
      stack_text_(s.stacks.size()) {}

const std::string* StackFormatter::frame(FrameId id) {
  if (id >= frame_state_.size()) return nullptr;  // a malformed id: treat like a filtered frame
  if (frame_state_[id] == 0) {
    const Frame& f = s_.frames[id];
    const bool keep = frame_filter(s_.str(f.name), s_.str(f.filename));
    frame_state_[id] = keep ? 1 : -1;
    if (keep) frame_text_[id] = frame_fmt(s_, f);
  }
  return frame_state_[id] > 0 ? &frame_text_[id] : nullptr;
}

const std::string& StackFormatter::fragment(StackId stack) {
  static const std::string kNonPython = "<non-python>";
  static const std::string kEmpty;
  if (stack >= stack_done_.size()) return kEmpty;
  if (!stack_done_[stack]) {
    auto frames = s_.recorded_stack(stack);  // PyTorch's tools print 'frames' alone, not forward_frames
    std::string text;
    if (frames.empty()) {
      text = kNonPython;
    } else {
      // Stacks are stored innermost first; flame graphs want the outermost caller first.
      bool first = true;
      for (size_t i = frames.size(); i-- > 0;) {
        const std::string* t = frame(frames[i]);
        if (!t) continue;
        if (!first) text += ';';
        text += *t;
        first = false;
      }
    }
    stack_text_[stack] = std::move(text);
    stack_done_[stack] = 1;
  }
  return stack_text_[stack];
}

uint64_t block_extra_size(const Snapshot& s, const Block& b) {
  if (!b.has_frames && b.has_history && b.num_history > 0) return s.history_of(b)[0].real_size;
  return b.requested_size;
}

namespace {

// `_write_blocks` for a 2.0 block with 'history': one line per history entry ("<no-context>" when it has no frames),
// then the bytes no entry accounts for as <gaps>.
void write_history(const Snapshot& s, StackFormatter* fmt, const std::string& prefix, const Block& b,
                   std::string* out) {
  const std::string_view state = s.state_text(b);
  __int128 accounted = 0;
  for (const BlockHistory& h : s.history_of(b)) {
    accounted += h.real_size;
    *out += prefix;
    *out += ';';
    *out += state;
    *out += ';';
    *out += h.has_frames ? fmt->fragment(h.stack) : std::string("<no-context>");
    *out += ' ';
    *out += py_int(h.real_size);
    *out += '\n';
  }
  const __int128 gaps = static_cast<__int128>(b.size) - accounted;
  if (gaps != 0) {
    *out += prefix + ';' + std::string(state) + ";<gaps> ";
    if (gaps < 0) out->push_back('-');
    const unsigned __int128 mag = gaps < 0 ? -gaps : gaps;
    std::string digits;
    for (unsigned __int128 m = mag; m || digits.empty(); m /= 10) digits.insert(digits.begin(), char('0' + int(m % 10)));
    *out += digits;
    *out += '\n';
  }
}

}  // namespace

void write_blocks(const Snapshot& s, StackFormatter* fmt, const std::string& prefix, const Segment& seg,
                  std::string* out) {
  for (const Block& b : s.blocks_of(seg)) {
    if (b.has_history) {
      write_history(s, fmt, prefix, b, out);
      continue;
    }
    const std::string_view state = s.state_text(b);
    *out += prefix;
    *out += ';';
    *out += state;
    *out += ';';
    *out += fmt->fragment(b.stack);
    *out += ' ';
    *out += py_int(b.requested_size);
    *out += '\n';
    // Python's integers are unbounded: a stale requested_size larger than the block gives a negative gap.
    const __int128 gaps = static_cast<__int128>(b.size) - static_cast<__int128>(b.requested_size);
    if (gaps != 0) {
      *out += prefix;
      *out += ';';
      *out += state;
      *out += ";<gaps> ";
      if (gaps < 0) out->push_back('-');
      *out += py_int(static_cast<uint64_t>(gaps < 0 ? -gaps : gaps));
      *out += '\n';
    }
  }
}

}  // namespace allocscope::memviz
