// Private helpers for the answers' human-readable text: sizes, padding, percentages.
#pragma once

#include <cstdint>
#include <string>

#include "allocscope/memviz.h"

namespace allocscope::text_detail {

inline std::string size(uint64_t b) { return memviz::format_size(b); }
inline std::string signed_size(int64_t b) {
  return (b < 0 ? "-" : "+") + memviz::format_size(b < 0 ? 0 - static_cast<uint64_t>(b) : static_cast<uint64_t>(b));
}
inline std::string rpad(std::string s, size_t w) {
  if (s.size() < w) s.insert(0, w - s.size(), ' ');
  return s;
}
inline std::string lpad(std::string s, size_t w) {
  if (s.size() < w) s.append(w - s.size(), ' ');
  return s;
}
inline std::string percent(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", x * 100.0);
  return buf;
}
inline std::string seconds(int64_t us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f s", static_cast<double>(us) / 1e6);
  return buf;
}

}  // namespace allocscope::text_detail
