// UTF-8 validation/repair and the text escapes of protocol-0 string opcodes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace allocscope::pickle {

bool utf8_valid(std::string_view s);
// Copies `s` to `out`, replacing each invalid byte sequence with U+FFFD.
void utf8_sanitize(std::string_view s, std::string* out);
// Decodes a Python 2 STRING literal ('...' or "..." with backslash escapes). Returns false if not quoted.
bool python_string_literal(std::string_view s, std::string* out);
// Decodes raw-unicode-escape text (UNICODE opcode): \uXXXX and \UXXXXXXXX, other bytes as Latin-1.
void raw_unicode_escape(std::string_view s, std::string* out);
void append_utf8(uint32_t cp, std::string* out);

}  // namespace allocscope::pickle
