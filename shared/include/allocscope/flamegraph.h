// Flame graph SVG from folded-stack lines, rendered in-process (PyTorch downloads flamegraph.pl instead).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace allocscope::flamegraph {

struct Options {
  std::string title = "Flame Graph";
  std::string count_name = "bytes";  // unit shown in each frame's tooltip
  int width = 1200;                  // pixels
  int frame_height = 16;
  int font_size = 12;
  double min_width = 0.1;  // frames narrower than this many pixels are left out (flamegraph.pl's default)
};

// Renders "frame;frame;frame COUNT" lines like flamegraph.pl: stacks merged from the root ("all"), siblings in
// alphabetical order, widths proportional to the summed counts. Lines without a positive integer count are skipped
// (flamegraph.pl ignores them too). Frame names are XML-escaped; the result is a standalone, well-formed SVG.
std::string render_svg(std::string_view folded, const Options& options = {});

}  // namespace allocscope::flamegraph
