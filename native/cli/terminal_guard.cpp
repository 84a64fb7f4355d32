// What reaches a terminal from a snapshot: frame and file names, annotation names, settings, the site texts of
// summary files, file names from a directory listing. A crafted name could set the window title, clear the screen
// or reverse the text that follows (an audit: `leaks` printed annotation names raw; `memory` and `segments`, and
// `ranks` reading summary files, printed frame names raw; C1 controls and U+202E passed every verb but `trace`).
//
// One filter at the boundary, for every verb: when stdout is a terminal, it is replaced by a stream that writes
// through to it with what escape_unsafe (frame_filter.h, the rule printable() uses too) escapes, newline and tab
// kept, written as \xNN or \uNNNN. A pipe or a file gets the bytes unchanged: the drop-in verbs' output
// must equal PyTorch's byte for byte, and a script reads what the file holds. stderr is left alone: it carries the
// progress lines, which move the cursor on purpose.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "allocscope/frame_filter.h"
#include "cli_common.h"

namespace allocscope::cli {

namespace {

struct Guard {
  int fd = STDOUT_FILENO;
  unsigned char pending[3];  // the start of a UTF-8 sequence a write ended inside
  size_t npending = 0;
};

bool write_all(int fd, const std::string& s) {
  size_t at = 0;
  while (at < s.size()) {
    const ssize_t n = ::write(fd, s.data() + at, s.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    at += static_cast<size_t>(n);
  }
  return true;
}

ssize_t guard_write(void* cookie, const char* buf, size_t size) {
  Guard* g = static_cast<Guard*>(cookie);
  // A sequence split by the previous write, completed by this one.
  std::string joined(reinterpret_cast<const char*>(g->pending), g->npending);
  joined.append(buf, size);
  std::string out;
  out.reserve(joined.size() + 16);
  const size_t used = escape_unsafe(reinterpret_cast<const unsigned char*>(joined.data()), joined.size(),
                                    /*at_end=*/false, /*keep_line_breaks=*/true, &out);
  g->npending = joined.size() - used;  // at most 2 bytes: the start of a 2- or 3-byte sequence
  std::memcpy(g->pending, joined.data() + used, g->npending);
  if (!write_all(g->fd, out)) return -1;
  return static_cast<ssize_t>(size);
}

int guard_close(void* cookie) {
  Guard* g = static_cast<Guard*>(cookie);
  std::string out;
  escape_unsafe(g->pending, g->npending, /*at_end=*/true, /*keep_line_breaks=*/true, &out);
  g->npending = 0;
  return write_all(g->fd, out) ? 0 : -1;
}

}  // namespace

void guard_terminal_output() {
  if (!isatty(STDOUT_FILENO)) return;
  static Guard guard;
  cookie_io_functions_t io{};
  io.write = guard_write;
  io.close = guard_close;
  FILE* f = fopencookie(&guard, "w", io);
  if (!f) return;  // no stream: the terminal gets the bytes as they are, as before
  std::setvbuf(f, nullptr, _IOLBF, 1 << 16);
  stdout = f;
}

}  // namespace allocscope::cli
