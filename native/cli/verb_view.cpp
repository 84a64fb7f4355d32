// `allocscope view`: serves the viewer (web pages + the wasm build) and the given snapshots on 127.0.0.1 and prints
// the URL that opens them. The browser parses them, unless one is too big for a tab: then this process loads them
// and answers the page's method calls itself (view_native.h).
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <thread>
#include <chrono>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "allocscope/loader.h"

#include "cli_common.h"
#include "verbs.h"
#include "view_native.h"
#include "web_assets.h"
#include "web_http.h"

namespace allocscope::cli {
namespace {

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop.store(true); }

// A request path maps to a file under `root` only if it has no "..", no hidden segment and no backslash.
bool safe_relative(const std::string& rel) {
  if (rel.empty() || rel.find('\\') != std::string::npos) return false;
  size_t start = 0;
  while (start <= rel.size()) {
    size_t end = rel.find('/', start);
    if (end == std::string::npos) end = rel.size();
    const std::string seg = rel.substr(start, end - start);
    if (seg.empty() || seg[0] == '.') return false;
    start = end + 1;
  }
  return true;
}

// A secret first path segment for everything served: 127.0.0.1 is reachable by every user of the machine (a shared
// login or GPU node), and the port is easy to find, so without it any of them could read the served snapshots. The
// pages use relative URLs only, so the printed URL's prefix carries over to every request they make.
std::string new_token() {
  std::random_device rd;  // getrandom(2) on glibc
  std::string t;
  for (int i = 0; i < 4; ++i) {
    char b[9];
    std::snprintf(b, sizeof b, "%08x", static_cast<unsigned>(rd()));
    t += b;
  }
  return t;
}

// The path after "/TOKEN" ("/..."), or "" when `path` does not start with "/TOKEN/"; compared in constant time.
std::string strip_token(const std::string& path, const std::string& token) {
  if (path.size() < token.size() + 2 || path[0] != '/' || path[token.size() + 1] != '/') return "";
  unsigned diff = 0;
  for (size_t i = 0; i < token.size(); ++i) diff |= static_cast<unsigned char>(path[i + 1] ^ token[i]);
  return diff ? "" : path.substr(token.size() + 1);
}

HttpResponse file_response(const std::string& path) {
  HttpResponse r;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    r.status = 404;
    r.body = "not found\n";
    return r;
  }
  r.file = path;
  r.content_type = mime_type(path);
  // Workers take their policy from their own response, so scripts get the page's CSP as a header too.
  if (r.content_type.rfind("text/html", 0) == 0 || r.content_type.rfind("text/javascript", 0) == 0)
    r.headers.emplace_back("Content-Security-Policy", kViewerCsp);
  return r;
}

// Whether `path` is a regular file that starts as a snapshot does: a pickle's PROTO opcode or gzip's magic. A ranks
// file is input like any other: its rows must not make the server hand out /etc/passwd or /proc/self/environ.
bool looks_like_snapshot(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  uint8_t head[4096];
  const size_t n = std::fread(head, 1, sizeof head, f);
  std::fclose(f);
  return (n >= 2 && ((head[0] == 0x80 && head[1] >= 2 && head[1] <= 5) || is_gzip({head, 2}))) ||
         is_json_snapshot({head, n});
}

// A file saved by `allocscope ranks --json` names the ranks' snapshots as `ranks` was given them (relative to where
// it ran, or absolute: "./rank0.pickle", "../run/rank2.pickle", "/data/rank3.pickle"). The viewer asks for each as
// rows/NAME under the ranks file's URL, the whole name one percent-encoded segment (so that "." and ".." stay part
// of it), and a plain relative name also as itself, as a static site beside the ranks file would serve it. Only the
// names in the file are served, found next to the ranks file or else in the current directory,
// and only files that start as snapshots do.
// A file written by `allocscope ranks --json` (its "kind"), read whole; null otherwise.
nlohmann::json ranks_report(const std::string& path) {
  std::error_code ec;
  if (path.size() <= 5 || path.compare(path.size() - 5, 5, ".json") != 0) return nullptr;
  if (std::filesystem::file_size(path, ec) > (256u << 20) || ec || looks_like_snapshot(path)) return nullptr;
  auto bytes = read_file(path);
  if (!bytes.ok()) return nullptr;
  auto j = nlohmann::json::parse(bytes->begin(), bytes->end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || j.value("kind", "") != "allocscope.ranks" || !j.contains("rows") || !j["rows"].is_array())
    return nullptr;
  return j;
}
bool is_ranks_report(const std::string& path) { return !ranks_report(path).is_null(); }

void serve_ranks_files(const std::string& ranks_file, const std::string& url_dir, std::map<std::string, std::string>* out) {
  const nlohmann::json j = ranks_report(ranks_file);
  if (j.is_null()) return;
  const std::filesystem::path beside = std::filesystem::path(ranks_file).parent_path();
  for (const auto& row : j["rows"]) {
    if (!row.is_object() || !row.contains("name") || !row["name"].is_string()) continue;
    const std::string name = row["name"].get<std::string>();
    if (name.empty() || name.find('\0') != std::string::npos) continue;
    const std::filesystem::path p(name);
    std::error_code ec;
    std::string disk = p.is_absolute() ? p.lexically_normal().string() : (beside / p).lexically_normal().string();
    if (!p.is_absolute() && !std::filesystem::is_regular_file(disk, ec))
      disk = std::filesystem::absolute(p, ec).lexically_normal().string();
    if (!looks_like_snapshot(disk)) continue;
    (*out)[url_dir + "rows/" + name] = disk;
    if (safe_relative(name)) (*out)[url_dir + name] = disk;  // a plain name, as a static site would serve it
  }
}

int run(const std::vector<std::string>& argv) {
  Args a = parse_args(argv, {"port", "p", "web-root", "backend"});
  if (a.positional.empty()) return fail("view: give one or more snapshot files (see allocscope view --help)");
  std::vector<std::string> files;
  for (const auto& f : a.positional) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(f, ec)) return fail("view: " + f + ": no such file");
    files.push_back(std::filesystem::absolute(f).string());
  }
  std::string why;
  auto assets = find_web_assets(a.get("web-root"), &why);
  if (!assets) return fail("view: " + why);

  const bool port_given = a.has("port") || a.has("p");
  const std::string port_text = a.get("port", a.get("p", "8765"));
  char* end = nullptr;
  const long port = std::strtol(port_text.c_str(), &end, 10);
  if (!end || *end || port < 0 || port > 65535) return fail("view: --port wants a number from 0 to 65535");
  HttpServer server;
  if (!server.listen(static_cast<uint16_t>(port), &why)) {
    // The default port may be taken by another viewer: any free port will do then.
    if (port_given || !server.listen(0, &why)) return fail("view: " + why);
  }

  // Where the files are parsed: in the tab (WebAssembly), or here when one is too big for a tab.
  const std::string backend = a.get("backend", "auto");
  if (backend != "auto" && backend != "browser" && backend != "native")
    return fail("view: --backend wants auto, browser or native");
  bool native = backend == "native";
  if (backend == "auto")
    for (const auto& f : files)
      if (too_big_for_a_tab(f, kTabPickleLimit)) native = true;
  // A ranks report is read by the page itself (its rows then open the ranks' snapshots): never parsed here.
  for (const auto& f : files)
    if (is_ranks_report(f)) native = false;
  // Always there: a page that ran out of memory on a file it was given to parse asks for it here instead (app.js).
  auto native_backend = std::make_unique<NativeBackend>(files, load_window());

  std::string query = native ? "?native=1" : "";
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string name = std::filesystem::path(files[i]).filename().string();
    // The name is a path segment first ('#', '?', '%' and newlines are not), then the whole a query value.
    query += (query.empty() ? "?url=" : "&url=") + url_encode_component("files/" + std::to_string(i) + "/" + url_encode_component(name));
  }
  // A window (--from/--to): the page loads only it, whether the tab parses the files or this process does (the
  // backend was given it above); the same texts, parsed by the same rule on both sides.
  if (!load_window_from().empty()) query += "&from=" + url_encode_component(load_window_from());
  if (!load_window_to().empty()) query += "&to=" + url_encode_component(load_window_to());
  const std::string token = new_token();
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port()) + "/" + token + "/" + query;

  std::map<std::string, std::string> rank_files;  // URL path -> file, for ranks files' rows
  for (size_t i = 0; i < files.size(); ++i) serve_ranks_files(files[i], "/files/" + std::to_string(i) + "/", &rank_files);

  const WebAssets& w = *assets;
  HttpHandler handler = [&](const HttpRequest& req) -> HttpResponse {
    const std::string path = strip_token(req.path, token);
    if (path.empty()) {
      HttpResponse r;
      r.status = 404;
      r.body = "not found (open the URL allocscope view printed)\n";
      return r;
    }
    if (path.rfind("/api/", 0) == 0) {
      HttpRequest api = req;
      api.path = path;
      if (auto r = native_backend->answer(api)) return *r;
    }
    if (req.method == "POST") {
      HttpResponse r;
      r.status = 405;
      r.body = "only GET and HEAD here\n";
      return r;
    }
    if (path == "/" || path == "/index.html") return file_response(w.pages + "/index.html");
    if (path == "/allocscope.js" || path == "/allocscope.wasm") return file_response(w.wasm + path);
    if (auto it = rank_files.find(path); it != rank_files.end()) return file_response(it->second);
    if (path.rfind("/files/", 0) == 0) {
      const size_t slash = path.find('/', 7);
      const std::string index = path.substr(7, slash == std::string::npos ? std::string::npos : slash - 7);
      // Only files/I/NAME, the URL printed for it: other names under files/I/ are a ranks file's rows or nothing.
      if (!index.empty() && index.size() < 6 && index.find_first_not_of("0123456789") == std::string::npos &&
          std::stoul(index) < files.size() && slash != std::string::npos &&
          path.substr(slash + 1) == std::filesystem::path(files[std::stoul(index)]).filename().string())
        return file_response(files[std::stoul(index)]);
    }
    // The example snapshots only (the folder may be the source tree's tests/fixtures, with much else in it).
    if (const std::string leaf = path.size() > 10 ? path.substr(10) : ""; path.rfind("/examples/", 0) == 0 &&
        !w.examples.empty() && safe_relative(leaf) && leaf.find('/') == std::string::npos &&
        (leaf.ends_with(".pickle") || leaf.ends_with(".pickle.gz")))
      return file_response(w.examples + "/" + leaf);
    if (safe_relative(path.substr(1))) return file_response(w.pages + path);
    HttpResponse r;
    r.status = 404;
    r.body = "not found\n";
    return r;
  };

  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::fprintf(stderr, "allocscope: serving %zu file%s with the viewer from %s (Ctrl-C stops)\n", files.size(),
               files.size() == 1 ? "" : "s", w.pages.c_str());
  if (native)
    std::fprintf(stderr, "allocscope: %s: the files are parsed here and the page asks this process for each view\n",
                 backend == "native" ? "--backend native" : "a file is too big for a browser tab");
  std::printf("%s\n", url.c_str());
  std::fflush(stdout);
  server.serve(handler, g_stop);
  // Answers still being made run on threads that use the handler and the backend: a load of a large file may take
  // a minute. A few hundred ms for a file being sent; then the process ends without unwinding what they use.
  for (int i = 0; i < 50 && server.busy() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::fprintf(stderr, "allocscope: stopped\n");
  if (server.busy() > 0) {
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(0);
  }
  return 0;
}

const RegisterVerb reg({"view",
                        "open snapshots in the web viewer, served on 127.0.0.1 (prints the URL)",
                        "usage: allocscope view [--port N] [--web-root DIR] [--backend auto|browser|native]\n"
                        "                       [--from A] [--to B] FILE...\n\n"
                        "Serves the viewer and FILE(s) on http://127.0.0.1:N/ (default 8765, or any free port when\n"
                        "8765 is taken) and prints the URL that opens them; serves until interrupted (Ctrl-C).\n"
                        "The URL starts with a random secret, new each run: other users of this machine can reach\n"
                        "127.0.0.1 too, and get nothing without it; whoever has the URL can read the files.\n"
                        "One file: explore it. Two: diff them. More: compare ranks. Files are parsed in the browser\n"
                        "(WebAssembly); nothing leaves the machine. A file saved by `allocscope ranks --json` opens\n"
                        "the Ranks view, and the snapshots it names (found beside it or in the current directory)\n"
                        "are served too, so each row opens its rank.\n\n"
                        "A file too big for a browser tab (a pickle past 2 GiB; WebAssembly's heap ends at 4 GB)\n"
                        "is parsed by this process instead, and the page asks it for every view over the same\n"
                        "connection: the same views and answers, with no limit but this machine's memory.\n\n"
                        "  --from, --to    open only steps A..B of each device's trace (or times: 10s, 200ms),\n"
                        "                  as `allocscope peak --from A --to B`: a file too big to open whole\n"
                        "                  is read through once and only the window is held (the page's\n"
                        "                  ?from=A&to=B does the same in any tab)\n"
                        "  --port N        port to listen on (0: any free port)\n"
                        "  --backend B     where files are parsed: auto (default: here when one is too big for a\n"
                        "                  tab), browser, or native (here, whatever their size)\n"
                        "  --web-root DIR  the viewer's folder: an assembled site (build/wasm/site) or web/\n"
                        "                  (default: the source tree's wasm build, see docs/viewer.md)\n",
                        run, 60});

}  // namespace
}  // namespace allocscope::cli
