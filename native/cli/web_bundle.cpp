// Bundles the viewer for the offline report. The viewer's modules follow simple rules (docs/viewer.md): imports are
// one line each, `import {..} from './x.js'`, `import x from`, `import x, {..} from` or `import * as x from`; exports
// are `export default`, `export function|class|const|let NAME`. That is all this rewriter understands; it fails
// loudly on anything else so a new module style cannot silently break the report.
#include "web_bundle.h"

#include <filesystem>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "allocscope/loader.h"
#include "web_sha256.h"

namespace allocscope::cli {

namespace {

namespace fs = std::filesystem;

std::string normalize(const std::string& from_module, const std::string& spec) {
  fs::path base = fs::path(from_module).parent_path();
  return (base / spec).lexically_normal().generic_string();
}

struct Module {
  std::string body;
  std::vector<std::string> deps;
};

bool transform(const std::string& id, const std::string& text, Module* out, std::string* why) {
  static const std::regex import_re(R"(^import\s+(.+?)\s+from\s+'(\.{1,2}/[^']+)';\s*$)");
  static const std::regex named_export_re(R"(^export\s+(async\s+function|function|class|const|let)\s+([A-Za-z_$][\w$]*))");
  std::istringstream in(text);
  std::string line;
  std::vector<std::string> exported;
  std::ostringstream body;
  while (std::getline(in, line)) {
    std::smatch m;
    if (line.rfind("import ", 0) == 0) {
      if (!std::regex_match(line, m, import_re)) return *why = id + ": import form the report bundler does not know: " + line, false;
      std::string clause = m[1], dep = normalize(id, m[2]);
      out->deps.push_back(dep);
      const std::string ref = "__m[\"" + dep + "\"]";
      if (clause.rfind("* as ", 0) == 0) {
        body << "const " << clause.substr(5) << " = " << ref << ";\n";
        continue;
      }
      std::string def, named;
      if (clause[0] == '{') named = clause;
      else if (auto comma = clause.find(','); comma != std::string::npos) def = clause.substr(0, comma), named = clause.substr(comma + 1);
      else def = clause;
      auto trim = [](std::string s) { s.erase(0, s.find_first_not_of(' ')); s.erase(s.find_last_not_of(' ') + 1); return s; };
      if (!trim(def).empty()) body << "const " << trim(def) << " = " << ref << ".default;\n";
      named = trim(named);
      if (!named.empty()) body << "const " << std::regex_replace(named, std::regex(R"(\s+as\s+)"), ": ") << " = " << ref << ";\n";
      continue;
    }
    if (line.rfind("export default ", 0) == 0) {
      body << "__exports.default = " << line.substr(15) << "\n";
      continue;
    }
    if (line.rfind("export ", 0) == 0) {
      if (!std::regex_search(line, m, named_export_re)) return *why = id + ": export form the report bundler does not know: " + line, false;
      exported.push_back(m[2]);
      body << line.substr(7) << "\n";
      continue;
    }
    if (line.find("</script") != std::string::npos) return *why = id + ": contains </script, which cannot be inlined", false;
    body << line << "\n";
  }
  for (const auto& e : exported) body << "__exports." << e << " = " << e << ";\n";
  out->body = body.str();
  return true;
}

}  // namespace

std::string bundle_modules(const std::string& pages, const std::string& entry, std::string* why) {
  std::map<std::string, Module> modules;
  std::vector<std::string> order;
  std::set<std::string> visiting;
  std::function<bool(const std::string&)> visit = [&](const std::string& id) -> bool {
    if (modules.count(id)) return true;
    if (visiting.count(id)) return *why = "import cycle through " + id, false;
    visiting.insert(id);
    auto text = slurp(pages + "/" + id);
    if (!text) return *why = "cannot read " + pages + "/" + id, false;
    Module m;
    if (!transform(id, *text, &m, why)) return false;
    for (const auto& d : m.deps)
      if (!visit(d)) return false;
    modules[id] = std::move(m);
    order.push_back(id);
    return true;
  };
  if (!visit(entry)) return "";
  std::ostringstream out;
  out << "const __m = {};\n";
  for (const auto& id : order)
    out << "__m[\"" << id << "\"] = (() => {\nconst __exports = {};\n" << modules[id].body << "return __exports;\n})();\n";
  return out.str();
}

bool embed_snapshot_file(const std::string& path, EmbeddedSnapshot* out, std::string* why) {
  auto bytes = read_snapshot_bytes(path);
  if (!bytes.ok()) return *why = bytes.error().describe(), false;
  out->name = std::filesystem::path(path).filename().string();
  if (is_gzip(*bytes)) {
    out->bytes.assign(bytes->begin(), bytes->end());
    return true;
  }
  auto z = gzip(*bytes, 6);
  if (!z.ok()) return *why = z.error().describe(), false;
  out->bytes.assign(z->begin(), z->end());
  return true;
}

std::string build_report(const WebAssets& a, const std::vector<EmbeddedSnapshot>& files, std::string* why,
                         const ReportWindow& window) {
  // Checked by the rule the page applies, so that the page's script only ever carries digits, a point and a unit.
  if (auto w = parse_trace_window(window.from, window.to); !w.ok()) return *why = w.error().describe(), "";
  const std::string window_js = window.from.empty() && window.to.empty()
                                    ? "null"
                                    : nlohmann::json{{"from", window.from}, {"to", window.to}}.dump();
  auto html = slurp(a.pages + "/index.html");
  auto css = slurp(a.pages + "/style.css");
  auto engine = slurp(a.pages + "/engine.js");
  auto worker = slurp(a.pages + "/worker.js");
  auto glue = slurp(a.wasm + "/allocscope.js");
  auto wasm = slurp(a.wasm + "/allocscope.wasm");
  if (!html || !css || !engine || !worker || !glue || !wasm) {
    *why = "cannot read the viewer's files from " + a.pages + " and " + a.wasm;
    return "";
  }
  std::string bundle = bundle_modules(a.pages, "app.js", why);
  if (bundle.empty()) return "";
  // The worker runs engine.js + the glue + worker.js from one blob; the wasm bytes come from this page.
  const std::string worker_src = *engine + "\n" + *glue + "\n" + *worker;
  const std::string prelude =
      "globalThis.__allocscopeEmbed = {\n"
      "  bytes(id) { const s = atob(document.getElementById(id).textContent.trim()); const b = new Uint8Array(s.length);\n"
      "    for (let i = 0; i < s.length; ++i) b[i] = s.charCodeAt(i); return b; },\n"
      "  worker() {\n"
      "    const wasm = document.getElementById('allocscope-wasm').textContent.trim();\n"
      "    const src = new Blob([`self.__allocscopeWasmB64 = \"${wasm}\";\\n`, this.bytes('allocscope-worker')], "
      "{ type: 'text/javascript' });\n"
      "    return new Worker(URL.createObjectURL(src));\n"
      "  },\n"
      "  files() { return Array.from(document.querySelectorAll('script[type=\"application/x-allocscope-snapshot\"]'),\n"
      "    (s) => ({ name: s.dataset.name, blob: new Blob([this.bytes(s.id)]) })); },\n"
      "  window: " + window_js + ",\n"
      "};\n";
  const std::string script = prelude + bundle;
  const std::string script_hash = base64(sha256_raw(script));
  const std::string style_hash = base64(sha256_raw(*css));
  const std::string csp = "default-src 'none'; script-src 'sha256-" + script_hash +
                          "' 'wasm-unsafe-eval'; worker-src blob:; style-src 'sha256-" + style_hash +
                          "'; img-src data: blob:; connect-src 'none'; font-src 'none'; object-src 'none'; "
                          "base-uri 'none'; form-action 'none'; frame-src 'none'";

  std::string out = *html;
  auto replace = [&](const std::regex& re, const std::string& with, const char* what) {
    std::smatch m;
    if (!std::regex_search(out, m, re)) return *why = std::string("index.html has no ") + what, false;
    out = m.prefix().str() + with + m.suffix().str();
    return true;
  };
  if (!replace(std::regex(R"(<meta http-equiv="Content-Security-Policy"[^>]*>)"),
               "<meta http-equiv=\"Content-Security-Policy\" content=\"" + csp + "\">", "CSP meta tag") ||
      !replace(std::regex(R"(<link rel="stylesheet" href="style.css">)"), "<style>" + *css + "</style>", "stylesheet link") ||
      !replace(std::regex(R"(<script type="module" src="app.js"></script>)"),
               "<script type=\"module\">" + script + "</script>", "app.js script tag"))
    return "";
  std::string data = "<script type=\"application/octet-stream\" id=\"allocscope-wasm\">" + base64(*wasm) +
                     "</script>\n<script type=\"application/octet-stream\" id=\"allocscope-worker\">" +
                     base64(worker_src) + "</script>\n";
  for (size_t i = 0; i < files.size(); ++i) {
    std::string name;
    for (char c : files[i].name) name += c == '"' ? std::string("&quot;") : c == '&' ? std::string("&amp;") : c == '<' ? std::string("&lt;") : std::string(1, c);
    data += "<script type=\"application/x-allocscope-snapshot\" id=\"allocscope-file-" + std::to_string(i) +
            "\" data-name=\"" + name + "\">" + base64(files[i].bytes) + "</script>\n";
  }
  const size_t body_end = out.rfind("</body>");
  if (body_end == std::string::npos) return *why = "index.html has no </body>", "";
  out.insert(body_end, data);
  return out;
}

}  // namespace allocscope::cli
