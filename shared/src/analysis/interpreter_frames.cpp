// The interpreter's own C frames (frame_filter.h, is_interpreter_frame): CPython's functions where no source file is
// known, or in the interpreter's binary.
#include <string_view>

#include "allocscope/frame_filter.h"

namespace allocscope {

namespace {

// CPython's exported and internal function names: Py_RunMain, PyRun_StringFlags, _PyEval_EvalFrameDefault,
// pymain_run_python, pyrun_file. "Py" must start a word of CPython's style (Py_, PyRun_, PyObject_...), so that a
// name like "Pyramid" is not taken.
bool cpython_name(std::string_view n) {
  if (n.rfind("pymain_", 0) == 0 || n.rfind("pyrun_", 0) == 0) return true;
  if (n.rfind("_Py", 0) == 0) n.remove_prefix(1);
  if (n.size() < 3 || n.rfind("Py", 0) != 0) return false;
  const char c = n[2];
  return c == '_' || (c >= 'A' && c <= 'Z');
}

// "python3.12", "python3", "python3.13t", "libpython3.12.so.1.0", "libpython3.12d.so": the interpreter's own binary.
bool interpreter_file(std::string_view file) {
  const size_t slash = file.rfind('/');
  std::string_view base = slash == std::string_view::npos ? file : file.substr(slash + 1);
  if (base.rfind("libpython", 0) == 0) return true;
  if (base.rfind("python", 0) != 0) return false;
  return base.substr(6).find_first_not_of("0123456789.tdm") == std::string_view::npos;
}

}  // namespace

bool is_interpreter_frame(std::string_view name, std::string_view filename) {
  if (!cpython_name(name)) return false;
  return filename.empty() || filename == "??" || interpreter_file(filename);
}

}  // namespace allocscope
