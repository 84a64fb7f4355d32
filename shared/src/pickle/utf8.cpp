// UTF-8 checks and protocol-0 text decoding for the pickle reader.
#include "pickle/utf8.h"

#include <cstdint>

namespace allocscope::pickle {

namespace {
// Length of the valid UTF-8 sequence at s[i], or 0 when invalid.
size_t seq_len(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if ((c & 0xE0) == 0xC0) n = 2, cp = c & 0x1F;
  else if ((c & 0xF0) == 0xE0) n = 3, cp = c & 0x0F;
  else if ((c & 0xF8) == 0xF0) n = 4, cp = c & 0x07;
  else return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const auto d = static_cast<unsigned char>(s[i + k]);
    if ((d & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (d & 0x3F);
  }
  // Overlong forms and values past U+10FFFF are invalid; surrogates are accepted (Python writes them with
  // 'surrogatepass').
  if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return 0;
  return n;
}
}  // namespace

bool utf8_valid(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t n = seq_len(s, i);
    if (!n) return false;
    i += n;
  }
  return true;
}

void append_utf8(uint32_t cp, std::string* out) {
  if (cp > 0x10FFFF) cp = 0xFFFD;
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

void utf8_sanitize(std::string_view s, std::string* out) {
  out->clear();
  for (size_t i = 0; i < s.size();) {
    size_t n = seq_len(s, i);
    if (!n) {
      append_utf8(0xFFFD, out);
      ++i;
    } else {
      out->append(s.substr(i, n));
      i += n;
    }
  }
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool python_string_literal(std::string_view s, std::string* out) {
  out->clear();
  if (s.size() < 2 || (s[0] != '\'' && s[0] != '"') || s.back() != s[0]) return false;
  s = s.substr(1, s.size() - 2);
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out->push_back(s[i]);
      continue;
    }
    char c = s[++i];
    switch (c) {
      case 'n': out->push_back('\n'); break;
      case 't': out->push_back('\t'); break;
      case 'r': out->push_back('\r'); break;
      case '0': out->push_back('\0'); break;
      case 'x':
        if (i + 2 < s.size() + 0 && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
          out->push_back(static_cast<char>(hexval(s[i + 1]) * 16 + hexval(s[i + 2])));
          i += 2;
        } else {
          out->append("\\x");
        }
        break;
      default: out->push_back(c);
    }
  }
  return true;
}

void raw_unicode_escape(std::string_view s, std::string* out) {
  out->clear();
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && (s[i + 1] == 'u' || s[i + 1] == 'U')) {
      size_t digits = s[i + 1] == 'u' ? 4 : 8;
      if (i + 2 + digits <= s.size()) {
        uint32_t cp = 0;
        bool ok = true;
        for (size_t k = 0; k < digits; ++k) {
          int h = hexval(s[i + 2 + k]);
          if (h < 0) ok = false;
          cp = cp * 16 + static_cast<uint32_t>(h < 0 ? 0 : h);
        }
        if (ok) {
          append_utf8(cp, out);
          i += 1 + digits;
          continue;
        }
      }
    }
    append_utf8(static_cast<unsigned char>(s[i]), out);  // Latin-1
  }
}

}  // namespace allocscope::pickle
