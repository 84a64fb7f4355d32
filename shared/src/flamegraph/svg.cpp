// A flamegraph.pl-style SVG renderer for folded stacks, so `segments`/`memory -o x.svg` need no Perl or network.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "allocscope/flamegraph.h"
#include "flamegraph/zoom.h"

namespace allocscope::flamegraph {
namespace {

constexpr int kMaxDepth = 1024;

struct Node {
  std::string name;
  uint64_t total = 0;
  std::map<std::string, uint32_t, std::less<>> children;  // name -> node index; sorted like flamegraph.pl
};

// Splits "stack COUNT"; false unless COUNT is a positive integer after the last space (as flamegraph.pl reads it).
bool parse_line(std::string_view line, std::string_view* stack, uint64_t* count) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
  const size_t sp = line.find_last_of(" \t");
  if (sp == std::string_view::npos || sp + 1 >= line.size()) return false;
  uint64_t v = 0;
  for (char c : line.substr(sp + 1)) {
    if (c < '0' || c > '9') return false;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    v = v > (UINT64_MAX - d) / 10 ? UINT64_MAX : v * 10 + d;  // saturate rather than wrap on absurd counts
  }
  if (v == 0) return false;
  *stack = line.substr(0, sp);
  while (!stack->empty() && (stack->back() == ' ' || stack->back() == '\t')) stack->remove_suffix(1);
  *count = v;
  return true;
}

// Escapes text for XML content and attribute values; control characters XML forbids become '?'.
std::string xml_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += (c < 0x20 && c != '\t' && c != '\n' && c != '\r') ? '?' : ch;
    }
  }
  return out;
}

// At most `n` code points of UTF-8 text (never splits a multi-byte character).
std::string_view utf8_prefix(std::string_view s, size_t n) {
  size_t i = 0;
  for (size_t cp = 0; i < s.size() && cp < n; ++cp) {
    ++i;
    while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) ++i;
  }
  return s.substr(0, i);
}

size_t utf8_length(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

// flamegraph.pl's "hot" palette, seeded by a hash of the name so a frame keeps its colour across graphs.
std::string color_for(std::string_view name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  const double v1 = static_cast<double>(h & 0xFFFF) / 65535.0;
  const double v2 = static_cast<double>((h >> 16) & 0xFFFF) / 65535.0;
  const double v3 = static_cast<double>((h >> 32) & 0xFFFF) / 65535.0;
  char buf[32];
  std::snprintf(buf, sizeof buf, "rgb(%d,%d,%d)", 205 + static_cast<int>(50 * v3), static_cast<int>(230 * v1),
                static_cast<int>(55 * v2));
  return buf;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

struct Layout {
  const std::vector<Node>& nodes;
  const Options& o;
  double per_unit;  // pixels per count
  double image_height;
  double ypad2;
  std::string* out;

  void draw(uint32_t id, int depth, uint64_t start, uint64_t grand_total) const {
    const Node& n = nodes[id];
    const double x1 = 10 + static_cast<double>(start) * per_unit;
    const double w = static_cast<double>(n.total) * per_unit;
    if (w < o.min_width) return;  // children are narrower still
    const double y2 = image_height - ypad2 - depth * o.frame_height;
    const double y1 = y2 - o.frame_height + 1;
    const std::string name = xml_escape(n.name);
    const double pct = 100.0 * static_cast<double>(n.total) / static_cast<double>(grand_total);
    // data-n keeps the full name for the zoom script, which re-cuts labels to the zoomed width.
    *out += "<g class=\"f\" data-n=\"" + name + "\"><title>" + name + " (" + std::to_string(n.total) + " " +
            xml_escape(o.count_name) + ", " + fmt("%.2f", pct) + "%)</title>";
    *out += "<rect x=\"" + fmt("%.2f", x1) + "\" y=\"" + fmt("%.1f", y1) + "\" width=\"" + fmt("%.2f", w) +
            "\" height=\"" + std::to_string(o.frame_height - 1) + "\" fill=\"" + color_for(n.name) +
            "\" rx=\"2\" ry=\"2\"/>";
    // Label only what fits (flamegraph.pl's 0.59 em per character), ending in ".." when cut.
    const auto fit = static_cast<size_t>(w / (o.font_size * 0.59));
    std::string label;
    if (fit >= 3) {
      label = n.name;
      if (utf8_length(label) > fit) label = std::string(utf8_prefix(label, fit - 2)) + "..";
    }
    *out += "<text x=\"" + fmt("%.2f", x1 + 3) + "\" y=\"" + fmt("%.1f", y1 + o.frame_height / 2.0 + 3) + "\">" +
            xml_escape(label) + "</text>";
    *out += "</g>\n";
    uint64_t child_start = start;
    for (const auto& [child_name, child] : n.children) {
      draw(child, depth + 1, child_start, grand_total);
      child_start += nodes[child].total;
    }
  }
};

}  // namespace

std::string render_svg(std::string_view folded, const Options& o) {
  std::vector<Node> nodes(1);
  nodes[0].name = "all";
  int max_depth = 0;
  while (!folded.empty()) {
    const size_t nl = folded.find('\n');
    const std::string_view line = folded.substr(0, nl);
    folded = nl == std::string_view::npos ? std::string_view() : folded.substr(nl + 1);
    std::string_view stack;
    uint64_t count = 0;
    if (!parse_line(line, &stack, &count)) continue;
    uint32_t cur = 0;
    nodes[0].total += count;
    int depth = 0;
    while (true) {
      // Untrusted input: past kMaxDepth the rest of the stack stays one frame, so drawing recursion stays bounded.
      const size_t semi = depth + 1 >= kMaxDepth ? std::string_view::npos : stack.find(';');
      const std::string_view frame = stack.substr(0, semi);
      auto it = nodes[cur].children.find(frame);
      uint32_t next;
      if (it == nodes[cur].children.end()) {
        next = static_cast<uint32_t>(nodes.size());
        nodes[cur].children.emplace(std::string(frame), next);
        nodes.push_back(Node{std::string(frame), 0, {}});
      } else {
        next = it->second;
      }
      nodes[next].total += count;
      cur = next;
      max_depth = std::max(max_depth, ++depth);
      if (semi == std::string_view::npos) break;
      stack = stack.substr(semi + 1);
    }
  }

  const double ypad1 = o.font_size * 3, ypad2 = o.font_size * 2 + 10;
  const double height = (max_depth + 1) * o.frame_height + ypad1 + ypad2;
  std::string out;
  out += "<?xml version=\"1.0\" standalone=\"no\"?>\n";
  out += "<svg version=\"1.1\" width=\"" + std::to_string(o.width) + "\" height=\"" + fmt("%.0f", height) +
         "\" viewBox=\"0 0 " + std::to_string(o.width) + " " + fmt("%.0f", height) +
         "\" xmlns=\"http://www.w3.org/2000/svg\">\n";
  out += "<style>text { font-family: Verdana, sans-serif; font-size: " + std::to_string(o.font_size) +
         "px; fill: #000; } g.f { cursor: pointer; } g.f:hover rect { stroke: #000; stroke-width: 0.5; }"
         " #reset { cursor: pointer; fill: #336; }</style>\n";
  out += "<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"#f8f8f0\"/>\n";
  out += "<text x=\"" + fmt("%.1f", o.width / 2.0) + "\" y=\"" + std::to_string(o.font_size * 2) +
         "\" text-anchor=\"middle\" style=\"font-size: " + std::to_string(o.font_size + 5) + "px\">" +
         xml_escape(o.title) + "</text>\n";
  out += "<text id=\"reset\" x=\"10\" y=\"" + std::to_string(o.font_size * 2) + "\">Reset Zoom</text>\n";
  if (nodes[0].total == 0) {
    out += "<text x=\"10\" y=\"" + fmt("%.0f", ypad1 + o.frame_height) + "\">no samples</text>\n";
  } else {
    const double per_unit = (o.width - 20) / static_cast<double>(nodes[0].total);
    Layout{nodes, o, per_unit, height, ypad2, &out}.draw(0, 0, 0, nodes[0].total);
  }
  out += zoom_script(o.width, o.font_size * 0.59);
  out += "</svg>\n";
  return out;
}

}  // namespace allocscope::flamegraph
