// Implementation of the CLI suite's helpers (fixture discovery, running the binary, XML well-formedness).
#include "test_util.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <span>
#include <sstream>

#include "allocscope/loader.h"

namespace fs = std::filesystem;

namespace clitest {

std::string fixtures_dir() { return ALLOCSCOPE_FIXTURES; }

// A name "external/NAME" is a snapshot of tests/fixtures/external, whose goldens live in external/expected.
static std::pair<std::string, std::string> dir_and_leaf(const std::string& name) {
  const size_t slash = name.rfind('/');
  if (slash == std::string::npos) return {fixtures_dir(), name};
  return {fixtures_dir() + "/" + name.substr(0, slash), name.substr(slash + 1)};
}

std::string expected_path(const std::string& name, const std::string& kind) {
  const auto [dir, leaf] = dir_and_leaf(name);
  const std::string plain = dir + "/expected/" + leaf + "." + kind;
  // Goldens over 1 MB are kept gzipped.
  return fs::exists(plain) || !fs::exists(plain + ".gz") ? plain : plain + ".gz";
}

std::string read_golden(const std::string& path) {
  const std::string bytes = read_text(path);
  const std::span<const uint8_t> view(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  if (!allocscope::is_gzip(view)) return bytes;
  auto inflated = allocscope::gunzip(view);
  if (!inflated.ok()) return "";
  return std::string(inflated.value().begin(), inflated.value().end());
}

bool file_exists(const std::string& path) { return fs::exists(path); }

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// One private folder per test process, removed with everything in it when the process exits (tests leave
// nothing in /tmp).
namespace {
struct ProcessTempDir {
  std::string path;
  bool made = false;
  ProcessTempDir() {
    std::string templ = (fs::temp_directory_path() / "allocscope_cli_test_XXXXXX").string();
    made = mkdtemp(templ.data()) != nullptr;
    path = made ? templ : fs::temp_directory_path().string();
  }
  ~ProcessTempDir() {
    std::error_code ec;
    if (made) fs::remove_all(path, ec);  // never the system folder itself
  }
};
}  // namespace

std::string temp_path(const std::string& leaf) {
  static const ProcessTempDir dir;
  static int counter = 0;
  return dir.path + "/" + std::to_string(++counter) + "_" + leaf;
}

std::string snapshot_path(const std::string& name) {
  const std::string plain = fixtures_dir() + "/" + name + ".pickle";
  return file_exists(plain) ? plain : plain + ".gz";
}

std::vector<std::string> fixture_names() {
  std::vector<std::string> names;
  for (const std::string sub : {"", "external/", "hostile_valid/"}) {
    for (const auto& entry : fs::directory_iterator(fixtures_dir() + "/" + sub)) {
      std::string leaf = entry.path().filename().string();
      for (const std::string suffix : {".pickle.gz", ".pickle"}) {
        if (leaf.size() > suffix.size() && leaf.compare(leaf.size() - suffix.size(), suffix.size(), suffix) == 0) {
          names.push_back(sub + leaf.substr(0, leaf.size() - suffix.size()));
          break;
        }
      }
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

const allocscope::Snapshot& fixture(const std::string& name) {
  static std::map<std::string, std::unique_ptr<allocscope::Snapshot>> cache;
  auto it = cache.find(name);
  if (it == cache.end()) {
    auto r = allocscope::load_snapshot_file(snapshot_path(name));
    auto snap = std::make_unique<allocscope::Snapshot>();
    if (!r.ok()) {
      ADD_FAILURE() << name << ": " << r.error().describe();
    } else {
      *snap = std::move(r).value();
    }
    it = cache.emplace(name, std::move(snap)).first;
  }
  return *it->second;
}

static std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') {
      q.append("'\\''");
    } else {
      q.push_back(c);
    }
  }
  q.push_back('\'');
  return q;
}

RunResult run_cli(const std::vector<std::string>& args, const std::string& stdin_path,
                  const std::vector<std::string>& env) {
  const std::string out_path = temp_path("stdout"), err_path = temp_path("stderr");
  std::string cmd;
  for (const auto& e : env) cmd.append(shell_quote(e)).append(" ");
  if (!env.empty()) cmd.insert(0, "env ");
  cmd.append(shell_quote(ALLOCSCOPE_CLI));
  for (const auto& a : args) cmd.append(" ").append(shell_quote(a));
  cmd.append(" >").append(shell_quote(out_path)).append(" 2>").append(shell_quote(err_path));
  cmd.append(" <").append(shell_quote(stdin_path));
  const int status = std::system(cmd.c_str());
  RunResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  r.out = read_text(out_path);
  r.err = read_text(err_path);
  fs::remove(out_path);
  fs::remove(err_path);
  return r;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    const size_t nl = text.find('\n', start);
    if (nl == std::string::npos) {
      out.push_back(text.substr(start));
      break;
    }
    out.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

namespace {

bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == ':' || c == '.'; }

// Checks entity references in text or attribute values.
std::string check_text(const std::string& t, size_t at) {
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '<') return "stray '<' at " + std::to_string(at + i);
    if (t[i] != '&') continue;
    const size_t semi = t.find(';', i);
    if (semi == std::string::npos) return "unterminated entity at " + std::to_string(at + i);
    const std::string ent = t.substr(i + 1, semi - i - 1);
    const bool numeric = ent.size() > 1 && ent[0] == '#';
    if (!numeric && ent != "amp" && ent != "lt" && ent != "gt" && ent != "quot" && ent != "apos")
      return "unknown entity &" + ent + "; at " + std::to_string(at + i);
    i = semi;
  }
  return "";
}

}  // namespace

std::string xml_problem(const std::string& x) {
  std::vector<std::string> open;
  int roots = 0;
  size_t i = 0;
  while (i < x.size()) {
    if (x[i] != '<') {
      const size_t next = x.find('<', i);
      const std::string text = x.substr(i, next == std::string::npos ? std::string::npos : next - i);
      if (open.empty() && text.find_first_not_of(" \t\r\n") != std::string::npos)
        return "text outside the root at " + std::to_string(i);
      if (auto p = check_text(text, i); !p.empty()) return p;
      if (next == std::string::npos) break;
      i = next;
      continue;
    }
    if (x.compare(i, 2, "<?") == 0) {
      const size_t end = x.find("?>", i);
      if (end == std::string::npos) return "unterminated <? at " + std::to_string(i);
      i = end + 2;
      continue;
    }
    if (x.compare(i, 9, "<![CDATA[") == 0) {
      const size_t end = x.find("]]>", i);
      if (end == std::string::npos) return "unterminated CDATA at " + std::to_string(i);
      if (open.empty()) return "CDATA outside the root at " + std::to_string(i);
      i = end + 3;
      continue;
    }
    if (x.compare(i, 4, "<!--") == 0) {
      const size_t end = x.find("-->", i);
      if (end == std::string::npos) return "unterminated comment at " + std::to_string(i);
      i = end + 3;
      continue;
    }
    const bool closing = x.compare(i, 2, "</") == 0;
    size_t j = i + (closing ? 2 : 1);
    const size_t name_start = j;
    while (j < x.size() && name_char(x[j])) ++j;
    const std::string name = x.substr(name_start, j - name_start);
    if (name.empty()) return "tag without a name at " + std::to_string(i);
    if (closing) {
      while (j < x.size() && std::isspace(static_cast<unsigned char>(x[j]))) ++j;
      if (j >= x.size() || x[j] != '>') return "bad closing tag at " + std::to_string(i);
      if (open.empty() || open.back() != name) return "mismatched </" + name + "> at " + std::to_string(i);
      open.pop_back();
      i = j + 1;
      continue;
    }
    // Attributes: name="value" or name='value'.
    while (true) {
      while (j < x.size() && std::isspace(static_cast<unsigned char>(x[j]))) ++j;
      if (j >= x.size()) return "unterminated tag <" + name;
      if (x[j] == '>' || x.compare(j, 2, "/>") == 0) break;
      const size_t an = j;
      while (j < x.size() && name_char(x[j])) ++j;
      if (j == an || j >= x.size() || x[j] != '=') return "bad attribute in <" + name + "> at " + std::to_string(j);
      ++j;
      if (j >= x.size() || (x[j] != '"' && x[j] != '\'')) return "unquoted attribute at " + std::to_string(j);
      const char q = x[j];
      const size_t end = x.find(q, j + 1);
      if (end == std::string::npos) return "unterminated attribute at " + std::to_string(j);
      if (auto p = check_text(x.substr(j + 1, end - j - 1), j + 1); !p.empty()) return p;
      j = end + 1;
    }
    const bool self_closing = x[j] == '/';
    if (open.empty()) ++roots;
    if (roots > 1) return "second root element <" + name + ">";
    if (!self_closing) open.push_back(name);
    i = j + (self_closing ? 2 : 1);
  }
  if (!open.empty()) return "unclosed <" + open.back() + ">";
  if (roots != 1) return "no root element";
  return "";
}

}  // namespace clitest
