// The small inline script that makes our flame graph SVGs zoomable (click a frame; "Reset Zoom" restores).
#pragma once

#include <string>

namespace allocscope::flamegraph {

// A <script> element (CDATA-wrapped, no external resources) for an SVG `width` pixels wide with 10 px side padding
// whose frames are <g class="f" data-n="NAME"> holding a rect and a text; `char_width` is the label font's width.
std::string zoom_script(int width, double char_width);

}  // namespace allocscope::flamegraph
