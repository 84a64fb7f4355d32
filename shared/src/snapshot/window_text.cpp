// `--from/--to` as text (loader.h: parse_trace_window), one rule for the CLI and the viewer.
#include <cmath>
#include <cstdio>
#include <string>

#include "allocscope/loader.h"

namespace allocscope {

namespace {

struct End {
  bool given = false;
  bool time = false;
  int64_t value = 0;
};

Result<End> parse_end(std::string_view text, const char* which) {
  End e;
  if (text.empty()) return e;
  e.given = true;
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  auto bad = [&](const std::string& why) {
    return Error{std::string("--") + which + " '" + std::string(text.substr(0, 40)) + "': " + why +
                 "; expected a step (a whole number: the state after that many of each device's entries) or a time since the trace's first "
                 "entry with its unit (1.5s, 200ms, 300us)"};
  };
  if (digits == text.size()) {
    if (digits > 18) return bad("too large");
    e.value = std::stoll(std::string(text));
    return e;
  }
  // A number with a unit: the number is read by hand, so "1e3s", "nan s", " 5s" and a sign are refused.
  size_t i = digits;
  if (i < text.size() && text[i] == '.') {
    ++i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
  }
  const std::string_view number = text.substr(0, i), unit = text.substr(i);
  if (number.empty() || number == "." || number.size() > 24) return bad("not a number");
  double scale = 0;
  if (unit == "s") scale = 1e6;
  else if (unit == "ms") scale = 1e3;
  else if (unit == "us") scale = 1;
  else return bad(unit.empty() ? "not a number" : "unknown unit '" + std::string(unit.substr(0, 8)) + "'");
  const double us = std::stod(std::string(number)) * scale;
  if (!(us < 9e18)) return bad("too large");
  e.time = true;
  e.value = static_cast<int64_t>(std::llround(us));
  return e;
}

std::string time_text(int64_t us) {
  char buf[64];
  if (us % 1000000 == 0) std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(us / 1000000));
  else if (us % 1000 == 0) std::snprintf(buf, sizeof buf, "%lldms", static_cast<long long>(us / 1000));
  else std::snprintf(buf, sizeof buf, "%lldus", static_cast<long long>(us));
  return buf;
}

}  // namespace

Result<TraceWindow> parse_trace_window(std::string_view from, std::string_view to) {
  auto f = parse_end(from, "from");
  if (!f.ok()) return f.error();
  auto t = parse_end(to, "to");
  if (!t.ok()) return t.error();
  TraceWindow w;
  if (f.value().given && t.value().given && f.value().time != t.value().time)
    return Error{"--from and --to must both be steps or both be times (" + std::string(from) + ", " +
                 std::string(to) + ")"};
  w.unit = (f.value().given ? f.value().time : t.value().time) ? TraceWindow::Unit::kTimeUs
                                                               : TraceWindow::Unit::kStep;
  if (f.value().given) w.from = f.value().value;
  if (t.value().given) w.to = t.value().value;
  if (w.from > w.to) return Error{"--from " + std::string(from) + " is after --to " + std::string(to)};
  return w;
}

std::string describe_window(const TraceWindow& w) {
  const bool time = w.unit == TraceWindow::Unit::kTimeUs;
  auto end = [&](int64_t v) { return time ? time_text(v) : std::to_string(v); };
  const bool open_to = w.to == std::numeric_limits<int64_t>::max();
  std::string s = time ? "times " : "steps ";
  s += end(w.from) + (open_to ? " on" : "-" + end(w.to));
  if (time) s += " after each trace's first entry";
  return s;
}

}  // namespace allocscope
