// Frame classification for the answers (sites, flame trees, categories): memviz's filter plus a library test.
#include "allocscope/frame_filter.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "allocscope/memviz.h"

namespace allocscope {

namespace {

bool contains(std::string_view s, std::string_view what) { return s.find(what) != std::string_view::npos; }
bool ends_with(std::string_view s, std::string_view what) {
  return s.size() >= what.size() && s.substr(s.size() - what.size()) == what;
}

}  // namespace

std::string_view posix_path(std::string_view filename, std::string* buf) {
  if (filename.find('\\') == std::string_view::npos) return filename;
  buf->assign(filename);
  for (char& c : *buf) c = c == '\\' ? '/' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return *buf;
}

bool is_library_frame(std::string_view name, std::string_view filename_as_written) {
  (void)name;
  if (filename_as_written.empty() || filename_as_written == "??") return true;  // C++ frames without debug info
  // <frozen runpy>, <string> (exec'd and generated code: dataclasses, namedtuple), <eval_with_key>.1 (FX) are the
  // interpreter's or a library's. A notebook cell (<ipython-input-4-0f1e...>, as Colab and IPython before 8 name
  // them) and code typed at a prompt (<stdin>, <console>) are the user's own lines.
  if (filename_as_written.front() == '<')
    return !(filename_as_written.rfind("<ipython-input-", 0) == 0 || filename_as_written == "<stdin>" ||
             filename_as_written == "<console>");
  std::string buf;
  const std::string_view filename = posix_path(filename_as_written, &buf);
  // Installed packages and the interpreter's own library say "how", not "who": the user's line that called into
  // them is the answer people need.
  // torch.compile's generated code (Inductor writes it under <tmp>/torchinductor_<user>/) is not a line anyone
  // wrote: the user's line is the compiled module's caller.
  static constexpr std::string_view kLibraryDirs[] = {
      "/site-packages/", "/dist-packages/", "/torch/", "/usr/lib/", "/torchinductor_",
  };
  for (std::string_view d : kLibraryDirs)
    if (contains(filename, d)) return true;
  // The standard library: a "lib/pythonX.Y/" folder (or lib64), not any folder that starts with "python" (a
  // project's own lib/python_utils.py is the user's).
  for (std::string_view lib : {std::string_view("/lib/python"), std::string_view("/lib64/python")})
    for (size_t at = filename.find(lib); at != std::string_view::npos; at = filename.find(lib, at + 1)) {
      const size_t v = at + lib.size(), end = filename.find('/', v);
      if (end != std::string_view::npos && end > v &&
          filename.substr(v, end - v).find_first_not_of("0123456789.t") == std::string_view::npos)
        return true;  // python3.12, python3.13t (free-threaded)
    }
  // Windows' standard library (lower-cased above): a "lib" folder right under "pythonNNN" or "pythonNNN-32"
  // (python.org's installer), under a conda root (anaconda3\Lib\) or environment (envs\<name>\Lib\), under uv's
  // managed interpreters (uv\python\cpython-3.12.4-windows-x86_64-none\Lib\), pyenv-win's
  // (pyenv-win\versions\3.11.7\Lib\), or the Microsoft Store's (WindowsApps\PythonSoftwareFoundation.Python.3.12_...).
  if (filename.data() == buf.data()) {
    auto component_before = [&](size_t end) -> std::pair<std::string_view, size_t> {  // the folder ending at `end`
      if (end == 0 || end == std::string_view::npos) return {{}, std::string_view::npos};
      const size_t dir = filename.rfind('/', end - 1);
      const size_t start = dir == std::string_view::npos ? 0 : dir + 1;
      return {filename.substr(start, end - start), dir};
    };
    for (size_t at = filename.find("/lib/"); at != std::string_view::npos; at = filename.find("/lib/", at + 1)) {
      const auto [parent, parent_slash] = component_before(at);
      if (parent.size() > 6 && parent.rfind("python", 0) == 0) {
        std::string_view digits = parent.substr(6);
        if (digits.size() > 3 && digits.substr(digits.size() - 3) == "-32") digits.remove_suffix(3);
        if (!digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos) return true;
      }
      if (parent.rfind("cpython-", 0) == 0 || parent.rfind("pythonsoftwarefoundation.python.", 0) == 0) return true;
      const auto [grand, grand_slash] = component_before(parent_slash);
      (void)grand_slash;
      if (grand == "versions" && !parent.empty() && std::isdigit(static_cast<unsigned char>(parent[0])) &&
          parent.find_first_not_of("0123456789.") == std::string_view::npos && contains(filename, "/pyenv-win/"))
        return true;
      auto conda_root = [](std::string_view dir) {
        for (std::string_view root : {"anaconda3", "miniconda3", "miniforge3", "mambaforge", "anaconda", "miniconda", ".conda"})
          if (dir == root) return true;
        return false;
      };
      if (conda_root(parent)) return true;
      // envs\<name>\Lib\ of a conda root only: an RL project's own envstari\lib\ is the user's code.
      const auto [envs, envs_slash] = component_before(parent_slash);
      if (envs == "envs" && conda_root(component_before(envs_slash).first)) return true;
    }
  }
  // C/C++/CUDA sources are framework internals when stacks='all' is recorded; object files and shared libraries
  // (what an unwinder names when a binary has no line table, e.g. "thread48.o") are too.
  static constexpr std::string_view kNativeExt[] = {".cpp", ".cc", ".c", ".h", ".hpp", ".cu", ".cuh", ".o", ".so", ".S"};
  for (std::string_view e : kNativeExt)
    if (ends_with(filename, e)) return true;
  if (contains(filename, ".so.")) return true;  // libfoo.so.1
  const size_t slash = filename.rfind('/');
  const std::string_view base = slash == std::string_view::npos ? filename : filename.substr(slash + 1);
  // Start-up hooks (site's sitecustomize/usercustomize: allocscope's bootstrap, coverage, ddtrace) set the job up and
  // wrap its calls; a wrapper's frame sits between the job's line and the library it called.
  if (base == "sitecustomize.py" || base == "usercustomize.py") return true;
  // The interpreter's own executable ("/usr/bin/python3.12", "python3"): a capture names its native frames by the
  // binary when it has no line table, and they are the interpreter at work, never the job's code.
  const std::string_view exe = ends_with(base, ".exe") ? base.substr(0, base.size() - 4) : base;
  if (exe.rfind("python", 0) == 0 &&
      (exe.find_first_not_of("0123456789.", 6) == std::string_view::npos || exe == "pythonw"))
    return true;
  return false;
}

std::string_view autograd_node(std::string_view name) {
  // "torch::autograd::generated::MmBackward0::apply(std::vector<...>&&)", "torch::autograd::AccumulateGrad::apply(...)"
  static constexpr std::string_view kPrefix = "torch::autograd::";
  if (name.rfind(kPrefix, 0) != 0) return {};
  const size_t apply = name.find("::apply(");
  if (apply == std::string_view::npos) return {};
  const std::string_view qualified = name.substr(0, apply);
  const size_t last = qualified.rfind("::");
  const std::string_view node = qualified.substr(last + 2);
  // A node is a class (Backward0, AccumulateGrad, CopyBackwards, PyNode), not a namespace-level function.
  if (node.empty() || !std::isupper(static_cast<unsigned char>(node.front()))) return {};
  return node;
}

bool is_user_frame(std::string_view name, std::string_view filename) {
  return memviz::frame_filter(name, filename) && !is_library_frame(name, filename);
}

FrameFilter::FrameFilter(const Snapshot& s) {
  const size_t nf = s.frames.size();
  visible_.resize(nf);
  user_.resize(nf);
  for (size_t i = 0; i < nf; ++i) {
    const Frame& f = s.frames[i];
    const std::string_view name = s.str(f.name), file = s.str(f.filename);
    visible_[i] = memviz::frame_filter(name, file) && !is_interpreter_frame(name, file) ? 1 : 0;
    user_[i] = is_user_frame(name, file) ? 1 : 0;
  }
  const uint32_t ns = s.stacks.size();
  site_.assign(ns, kNoFrame);
  site_user_.assign(ns, 0);
  for (uint32_t id = 0; id < ns; ++id) {
    FrameId first_visible = kNoFrame, engine = kNoFrame, node = kNoFrame;
    std::span<const FrameId> own = s.stack(id);
    // A gradient's site is its forward line: an allocation made during backward whose entry has forward_frames
    // (PyTorch 2.13+) is the user's line of the forward op it belongs to, not the loss.backward() call (the same line
    // for every gradient) nor an autograd node. The loader put those frames behind a marker (kForwardPassFile).
    if (s.forward_marker != Snapshot::kNoForwardMarker) {
      const std::span<const FrameId> recorded = s.recorded_stack(id);
      if (recorded.size() < own.size()) {
        for (FrameId f : own.subspan(recorded.size() + 1))
          if (f < nf && user_[f]) {
            site_[id] = f;
            site_user_[id] = 1;
            break;
          }
        if (site_user_[id]) continue;
        own = recorded;
      }
    }
    for (FrameId f : own) {  // innermost first
      if (f >= nf) continue;          // malformed ids are skipped, never trusted
      if (user_[f]) {
        site_[id] = f;
        site_user_[id] = 1;
        break;
      }
      if (!visible_[f]) continue;
      const std::string_view name = s.str(s.frames[f].name);
      // Without user code, the operator is the best site, not the allocator's own frames.
      if (first_visible == kNoFrame && !contains(name, "Allocator") && name.rfind("c10::", 0) != 0 &&
          !contains(name, "at::detail::") && !contains(name, "empty"))
        first_visible = f;
      // The backward pass runs on the autograd engine's threads: the node (MmBackward0) says which operation's
      // gradient this is; without one (the engine's own bookkeeping), the engine itself.
      if (node == kNoFrame && !autograd_node(name).empty()) node = f;
      if (contains(name, "autograd::Engine::thread_main")) engine = f;
    }
    if (!site_user_[id]) site_[id] = node != kNoFrame ? node : engine != kNoFrame ? engine : first_visible;
  }
}

namespace {
void hex_escape(unsigned char c, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  *out += "\\x";
  *out += kHex[c >> 4];
  *out += kHex[c & 15];
}
void code_point_escape(unsigned cp, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  *out += "\\u";
  for (int shift = 12; shift >= 0; shift -= 4) *out += kHex[(cp >> shift) & 15];
}
}  // namespace

size_t escape_unsafe(const unsigned char* in, size_t n, bool at_end, bool keep_line_breaks, std::string* out) {
  size_t i = 0;
  while (i < n) {
    const unsigned char c = in[i];
    if ((c < 0x20 && !(keep_line_breaks && (c == '\n' || c == '\t'))) || c == 0x7f) {
      hex_escape(c, out);
      ++i;
    } else if (c == 0xc2 || c == 0xe2 || c == 0xed) {
      const size_t len = c == 0xc2 ? 2 : 3;
      if (i + len > n && !at_end) return i;  // the rest of this sequence comes with the next call
      const unsigned char b1 = i + 1 < n ? in[i + 1] : 0, b2 = i + 2 < n ? in[i + 2] : 0;
      if (c == 0xc2 && b1 >= 0x80 && b1 <= 0x9f) {
        code_point_escape(b1, out);  // U+0080..U+009F
        i += 2;
      } else if (c == 0xe2 && i + 2 < n &&
                 ((b1 == 0x80 && b2 >= 0xa8 && b2 <= 0xae) || (b1 == 0x81 && b2 >= 0xa6 && b2 <= 0xa9))) {
        code_point_escape(0x2000u + ((b1 & 0x3fu) << 6) + (b2 & 0x3fu), out);  // U+2028-U+202E, U+2066-U+2069
        i += 3;
      } else if (c == 0xed && i + 2 < n && b1 >= 0xa0 && b1 <= 0xbf) {
        code_point_escape(0xd000u + ((b1 & 0x3fu) << 6) + (b2 & 0x3fu), out);  // a lone surrogate
        i += 3;
      } else {
        out->push_back(static_cast<char>(c));
        ++i;
      }
    } else {
      out->push_back(static_cast<char>(c));
      ++i;
    }
  }
  return i;
}

// Control characters from a file would drive the terminal a text answer is printed on (a frame named
// "\x1b]0;...\x07\x1b[2J" set the window's title and cleared the screen): they are written as \xNN. `trace` escapes
// its strings as Python's repr does; the drop-in verbs keep PyTorch's bytes.
std::string printable(std::string s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  if (std::none_of(p, p + s.size(), [](unsigned char c) { return c < 0x20 || c == 0x7f || c == 0xc2 || c == 0xe2 || c == 0xed; }))
    return s;
  std::string out;
  out.reserve(s.size() + 8);
  escape_unsafe(p, s.size(), /*at_end=*/true, /*keep_line_breaks=*/false, &out);
  return out;
}

std::string FrameFilter::format(const Snapshot& s, FrameId f, bool full_filename) {
  if (f >= s.frames.size()) return "<no frames>";
  std::string out = memviz::frame_fmt(s, s.frames[f], full_filename);
  // PyTorch's format (kept as is by the drop-in verbs) cuts a path at its last '/' only, so a Windows path stayed
  // whole ("d:\ai\proj\unet.py:134:forward"); our answers name the file, as for any other path.
  if (!full_filename) {
    std::string_view file = s.str(s.frames[f].filename);
    if (const size_t slash = file.rfind('/'); slash != std::string_view::npos) file = file.substr(slash + 1);
    if (const size_t bs = file.rfind('\\'); bs != std::string_view::npos) out.erase(0, bs + 1);
  }
  return printable(std::move(out));
}

std::string FrameFilter::site_text(const Snapshot& s, FrameId f, bool full_filename) {
  if (f >= s.frames.size()) return "<no frames>";
  const std::string_view name = s.str(s.frames[f].name);
  if (const std::string_view node = autograd_node(name); !node.empty()) return printable("backward: " + std::string(node));
  if (contains(name, "autograd::Engine::thread_main")) return "backward: autograd engine";
  return format(s, f, full_filename);
}

std::vector<FrameId> FrameFilter::frames_from_site(const Snapshot& s, StackId id, size_t max_frames) const {
  if (!has_user_frame(id)) return shown_frames(s, id, max_frames);
  std::vector<FrameId> out;
  bool reached = false;
  for (FrameId f : s.stack(id)) {
    if (out.size() >= max_frames) break;
    reached = reached || f == site(id);
    if (reached && visible(f)) out.push_back(f);
  }
  return out;
}

std::vector<FrameId> FrameFilter::shown_frames(const Snapshot& s, StackId id, size_t max_frames) const {
  std::vector<FrameId> out;
  for (FrameId f : s.stack(id)) {
    if (out.size() >= max_frames) break;
    if (visible(f)) out.push_back(f);
  }
  return out;
}

}  // namespace allocscope
