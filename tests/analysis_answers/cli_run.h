// Running the built `allocscope` binary from a test: exit code, stdout and stderr, and its JSON.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace allocscope::test {

struct CliRun {
  int code = -1;
  std::string out, err;
};

inline std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs `program` (a path or a name on PATH) with `args`: exit code, stdout and stderr.
inline CliRun run_program(const std::string& program, const std::vector<std::string>& args) {
  static int n = 0;
  // ctest runs each test in its own process, two at a time: the pid keeps their stderr files apart.
  const std::string err_path =
      ::testing::TempDir() + "answers_cli_err_" + std::to_string(getpid()) + "_" + std::to_string(n++);
  std::string cmd = quote(program);
  // Appended piecewise: GCC 12 warns falsely (-Wrestrict) on `"literal" + std::string` here.
  for (const auto& a : args) {
    cmd += ' ';
    cmd += quote(a);
  }
  cmd += " 2>";
  cmd += quote(err_path);
  cmd += " </dev/null";
  CliRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[65536];
  size_t got;
  while ((got = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, got);
  const int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  if (FILE* e = fopen(err_path.c_str(), "r")) {
    while ((got = fread(buf, 1, sizeof buf, e)) > 0) r.err.append(buf, got);
    fclose(e);
  }
  std::remove(err_path.c_str());
  return r;
}

inline CliRun run(const std::vector<std::string>& args) { return run_program(ALLOCSCOPE_CLI, args); }

inline nlohmann::json json_of(const CliRun& r) {
  EXPECT_EQ(r.code == 0 || r.code == 3, true) << r.err;
  try {
    return nlohmann::json::parse(r.out);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not JSON: " << e.what() << "\n" << r.out.substr(0, 400);
    return {};
  }
}

}  // namespace allocscope::test
