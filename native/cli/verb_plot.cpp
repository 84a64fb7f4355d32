// `allocscope plot`: one offline HTML file with the viewer, its wasm and the snapshot(s) inside; it opens from disk,
// by mail or from any static host and makes no network request.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "cli_common.h"
#include "verbs.h"
#include "web_assets.h"
#include "web_bundle.h"

namespace allocscope::cli {
namespace {

int run(const std::vector<std::string>& argv) {
  Args a = parse_args(argv, {"o", "output", "web-root"});
  if (a.positional.empty()) return fail("plot: give a snapshot file (see allocscope plot --help)");
  std::string out = a.get("o", a.get("output"));
  if (out.empty()) {
    std::string base = std::filesystem::path(a.positional[0]).filename().string();
    for (const char* ext : {".gz", ".pickle", ".pkl"})
      if (base.size() > std::strlen(ext) && base.compare(base.size() - std::strlen(ext), std::string::npos, ext) == 0)
        base.resize(base.size() - std::strlen(ext));
    out = base + ".html";
  }
  std::string why;
  auto assets = find_web_assets(a.get("web-root"), &why);
  if (!assets) return fail("plot: " + why);

  std::vector<EmbeddedSnapshot> files;
  for (const auto& path : a.positional) {
    // Parse it here first: a file the viewer cannot open should fail now, with the byte offset, not in a browser.
    Snapshot s;
    if (!load_or_report(path, &s)) return 1;
    EmbeddedSnapshot e;
    if (!embed_snapshot_file(path, &e, &why)) return fail("plot: " + why);
    files.push_back(std::move(e));
  }
  // --from/--to: the checks above loaded only the window (load_or_report), and the page will too.
  std::string html = build_report(*assets, files, &why, {load_window_from(), load_window_to()});
  if (html.empty()) return fail("plot: " + why);
  const std::string tmp = out + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    f.write(html.data(), static_cast<std::streamsize>(html.size()));
    if (!f) return fail("plot: cannot write " + tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, out, ec);
  if (ec) return fail("plot: cannot write " + out + ": " + ec.message());
  std::fprintf(stderr, "allocscope: wrote %s (%.1f MiB, opens offline in any modern browser)\n", out.c_str(),
               static_cast<double>(html.size()) / (1 << 20));
  return 0;
}

const RegisterVerb reg({"plot",
                        "write one self-contained offline HTML viewer of snapshots (-o report.html)",
                        "usage: allocscope plot FILE... [-o report.html] [--from A --to B] [--web-root DIR]\n\n"
                        "Writes a single HTML file holding the viewer, its WebAssembly core and FILE(s) (gzipped), so\n"
                        "it opens offline from disk and makes no network request. Two files open in diff mode.\n\n"
                        "  -o, --output F  where to write (default: FILE's name with .html)\n"
                        "  --from, --to    the page opens only steps A..B of each device's trace (or times: 10s,\n"
                        "                  200ms), as `allocscope peak --from A --to B`; the whole file is inside\n"
                        "  --web-root DIR  the viewer's folder (see allocscope view --help)\n",
                        run, 61});

}  // namespace
}  // namespace allocscope::cli
