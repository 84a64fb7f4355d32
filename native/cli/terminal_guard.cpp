// What reaches a terminal from a snapshot: frame and file names, annotation names, settings, the site texts of
// summary files, file names from a directory listing. A crafted name could set the window title, clear the screen
// or reverse the text that follows (an audit: `leaks` printed annotation names raw; `memory` and `segments`, and
// `ranks` reading summary files, printed frame names raw; C1 controls and U+202E passed every verb but `trace`).
//
// One filter at the boundary, for every verb: when stdout is a terminal, it is replaced by a stream that writes
// through to it with the C0 controls other than newline and tab, DEL, the C1 controls (U+0080-U+009F: some
// terminals read U+009B as CSI) and the bidirectional embeddings, overrides and isolates (U+202A-U+202E,
// U+2066-U+2069) written as \xNN or \uNNNN. A pipe or a file gets the bytes unchanged: the drop-in verbs' output
// must equal PyTorch's byte for byte, and a script reads what the file holds. stderr is left alone: it carries the
// progress lines, which move the cursor on purpose.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

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

void hex_escape(unsigned char c, std::string* out) {
  char b[8];
  std::snprintf(b, sizeof b, "\\x%02x", c);
  *out += b;
}

void code_point_escape(unsigned cp, std::string* out) {
  char b[12];
  std::snprintf(b, sizeof b, "\\u%04x", cp);
  *out += b;
}

}  // namespace

size_t escape_for_terminal(const unsigned char* in, size_t n, bool at_end, std::string* out) {
  size_t i = 0;
  while (i < n) {
    const unsigned char c = in[i];
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
      hex_escape(c, out);
      ++i;
    } else if (c == 0xc2 || c == 0xe2) {
      const size_t len = c == 0xc2 ? 2 : 3;
      if (i + len > n && !at_end) return i;  // the rest of this sequence comes with the next write
      if (c == 0xc2 && i + 1 < n && in[i + 1] >= 0x80 && in[i + 1] <= 0x9f) {
        code_point_escape(in[i + 1], out);  // U+0080..U+009F
        i += 2;
      } else if (c == 0xe2 && i + 2 < n &&
                 ((in[i + 1] == 0x80 && in[i + 2] >= 0xaa && in[i + 2] <= 0xae) ||
                  (in[i + 1] == 0x81 && in[i + 2] >= 0xa6 && in[i + 2] <= 0xa9))) {
        code_point_escape(0x2000u + ((in[i + 1] & 0x3fu) << 6) + (in[i + 2] & 0x3fu), out);
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

namespace {

ssize_t guard_write(void* cookie, const char* buf, size_t size) {
  Guard* g = static_cast<Guard*>(cookie);
  // A sequence split by the previous write, completed by this one.
  std::string joined(reinterpret_cast<const char*>(g->pending), g->npending);
  joined.append(buf, size);
  std::string out;
  out.reserve(joined.size() + 16);
  const size_t used = escape_for_terminal(reinterpret_cast<const unsigned char*>(joined.data()), joined.size(),
                                          /*at_end=*/false, &out);
  g->npending = joined.size() - used;  // at most 2 bytes: the start of a 2- or 3-byte sequence
  std::memcpy(g->pending, joined.data() + used, g->npending);
  if (!write_all(g->fd, out)) return -1;
  return static_cast<ssize_t>(size);
}

int guard_close(void* cookie) {
  Guard* g = static_cast<Guard*>(cookie);
  std::string out;
  escape_for_terminal(g->pending, g->npending, /*at_end=*/true, &out);
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
