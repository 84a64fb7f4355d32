// The in-process flame graph: well-formed SVG, frame names present and escaped, bad lines skipped.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "allocscope/flamegraph.h"
#include "allocscope/memviz.h"
#include "test_util.h"

namespace {

namespace fg = allocscope::flamegraph;

size_t count_of(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1)) ++n;
  return n;
}

TEST(FlameGraph, EscapesNamesAndStaysWellFormed) {
  const std::string svg = fg::render_svg("a&b;<c> \"q\" 'r' 10\na&b;d 30\nbad line\nneg;x -5\nzero 0\n");
  EXPECT_EQ(clitest::xml_problem(svg), "") << svg;
  EXPECT_NE(svg.find("<title>a&amp;b (40 bytes, 100.00%)</title>"), std::string::npos) << svg;
  EXPECT_NE(svg.find("<title>&lt;c&gt; &quot;q&quot; &apos;r&apos; (10 bytes, 25.00%)</title>"), std::string::npos);
  EXPECT_NE(svg.find("<title>d (30 bytes, 75.00%)</title>"), std::string::npos);
  EXPECT_EQ(svg.find("neg"), std::string::npos);  // negative counts cannot be drawn (flamegraph.pl skips them)
  EXPECT_EQ(svg.find("zero"), std::string::npos);
  EXPECT_EQ(count_of(svg, "<rect x="), 4u + 1u);  // all, a&b, <c>..., d + the background
}

// The click-to-zoom script is inline (no network), CDATA-wrapped, and valid JavaScript (node --check, when present).
TEST(FlameGraph, ZoomScriptIsSelfContained) {
  const std::string svg = fg::render_svg("main;alloc 100\nmain;free 50\n");
  EXPECT_NE(svg.find("<g class=\"f\" data-n=\"alloc\">"), std::string::npos);
  EXPECT_NE(svg.find("id=\"reset\""), std::string::npos);
  EXPECT_EQ(svg.find("http://www.w3.org/2000/svg"), svg.rfind("http"));  // no other URL: nothing is fetched
  const size_t begin = svg.find("<![CDATA["), end = svg.find("]]>");
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  if (!clitest::file_exists("/usr/bin/node")) GTEST_SKIP() << "node not installed";
  const std::string js = clitest::temp_path("zoom.js");
  clitest::write_bytes(js, svg.substr(begin + 9, end - begin - 9));
  EXPECT_EQ(std::system(("/usr/bin/node --check '" + js + "'").c_str()), 0);
}

TEST(FlameGraph, EmptyInputIsStillAnSvg) {
  const std::string svg = fg::render_svg("");
  EXPECT_EQ(clitest::xml_problem(svg), "");
  EXPECT_NE(svg.find("no samples"), std::string::npos);
}

TEST(FlameGraph, FixtureGraphHasItsFrames) {
  const auto& s = clitest::fixture("linear_seed");
  const std::string svg = fg::render_svg(allocscope::memviz::segments_folded(s));
  EXPECT_EQ(clitest::xml_problem(svg), "");
  for (const char* frame : {"linear.py:134:forward", "gen_snapshots.py:37:linear_seed", "&lt;non-python&gt;",
                            "active_allocated", "inactive", "seg_140219273707520", "stream_0"})
    EXPECT_NE(svg.find(frame), std::string::npos) << frame;
}

// The CLI writes the SVG with -o and nothing on stdout; xmllint (when installed) agrees it is well-formed.
TEST(FlameGraph, CliWritesSvg) {
  for (const std::string verb : {"segments", "memory"}) {
    const std::string path = clitest::temp_path(verb + ".svg");
    const auto r = clitest::run_cli({verb, clitest::snapshot_path("gpt2_cpp"), "-o", path});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "");
    const std::string svg = clitest::read_text(path);
    EXPECT_EQ(clitest::xml_problem(svg), "") << verb;
    EXPECT_NE(svg.find("<svg "), std::string::npos);
    EXPECT_NE(svg.find("stream_0"), std::string::npos);
    EXPECT_NE(svg.find("&lt;gaps&gt;"), std::string::npos);
    if (clitest::file_exists("/usr/bin/xmllint")) {
      EXPECT_EQ(std::system(("/usr/bin/xmllint --noout '" + path + "'").c_str()), 0) << verb;
    }
  }
}

}  // namespace
