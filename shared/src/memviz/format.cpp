// Python-compatible number and string formatting that `_memory_viz.py` relies on (`_format_size`, "%.1f", repr).
#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>

#include "allocscope/memviz.h"
#include "pickle/utf8.h"

namespace allocscope::memviz {

std::string format_1f(double v) {
  // glibc's and musl's printf round the exact binary value half-to-even, like CPython's float formatting.
  char buf[400];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string format_size(double num) {
  static constexpr const char* kUnits[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi"};
  for (const char* unit : kUnits) {
    if (std::fabs(num) < 1024.0) return format_1f(num) + unit + "B";
    num /= 1024.0;
  }
  return format_1f(num) + "YiB";
}

std::string format_size(int64_t num) { return format_size(static_cast<double>(num)); }
std::string format_size(uint64_t num) { return format_size(static_cast<double>(num)); }

namespace {

// Decodes one UTF-8 sequence at s[*i] (advancing *i); malformed bytes decode as themselves so nothing is lost.
uint32_t next_code_point(std::string_view s, size_t* i) {
  const auto b0 = static_cast<uint8_t>(s[*i]);
  const size_t extra = b0 >= 0xF0 ? 3 : b0 >= 0xE0 ? 2 : b0 >= 0xC0 ? 1 : 0;
  if (extra == 0 || *i + extra >= s.size()) {
    ++*i;
    return b0;
  }
  uint32_t cp = b0 & (0x3Fu >> extra);
  for (size_t k = 1; k <= extra; ++k) {
    const auto b = static_cast<uint8_t>(s[*i + k]);
    if ((b & 0xC0) != 0x80) {
      ++*i;
      return b0;
    }
    cp = (cp << 6) | (b & 0x3Fu);
  }
  *i += extra + 1;
  return cp;
}

// str.isprintable() for non-ASCII code points: false for the control, format, separator (other than ' '),
// private-use and surrogate categories. Unassigned code points are treated as printable (a rare approximation).
bool printable_non_ascii(uint32_t c) {
  if (c <= 0xA0) return false;  // C1 controls and NO-BREAK SPACE
  if (c == 0xAD || c == 0x61C || c == 0x6DD || c == 0x70F || c == 0x1680 || c == 0x180E || c == 0x3000 ||
      c == 0xFEFF || c == 0x8E2)
    return false;
  if ((c >= 0x600 && c <= 0x605) || (c >= 0x890 && c <= 0x891)) return false;
  if (c >= 0x2000 && c <= 0x200F) return false;
  if (c >= 0x2028 && c <= 0x202F) return false;
  if (c >= 0x205F && c <= 0x206F) return false;
  if (c >= 0xD800 && c <= 0xF8FF) return false;  // surrogates, private use
  if (c >= 0xFFF9 && c <= 0xFFFB) return false;
  if (c == 0xFFFE || c == 0xFFFF) return false;
  if (c == 0x110BD || c == 0x110CD) return false;
  if (c >= 0x1BCA0 && c <= 0x1BCA3) return false;
  if (c >= 0x1D173 && c <= 0x1D17A) return false;
  if (c >= 0x13430 && c <= 0x1343F) return false;  // hieroglyph format controls: Cf, or unassigned before Unicode 15
  // Tags (Cf) and unassigned, but not the variation selectors U+E0100-U+E01EF (Mn, printable).
  if (c >= 0xE0000 && c <= 0xE0FFF && !(c >= 0xE0100 && c <= 0xE01EF)) return false;
  if (c >= 0xF0000) return false;  // supplementary private use
  return true;
}

void append_escape(std::string* out, const char* fmt, uint32_t c) {
  char buf[16];
  std::snprintf(buf, sizeof buf, fmt, c);
  *out += buf;
}

}  // namespace

std::string py_repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out;
  out.reserve(s.size() + 2);
  out += quote;
  for (size_t i = 0; i < s.size();) {
    const uint32_t c = next_code_point(s, &i);
    if (c == static_cast<uint32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7F) {
      append_escape(&out, "\\x%02x", c);
    } else if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (!printable_non_ascii(c)) {
      append_escape(&out, c <= 0xFF ? "\\x%02x" : c <= 0xFFFF ? "\\u%04x" : "\\U%08x", c);
    } else {
      pickle::append_utf8(c, &out);  // the input was valid UTF-8 here, so this reproduces its bytes
    }
  }
  out += quote;
  return out;
}

}  // namespace allocscope::memviz
