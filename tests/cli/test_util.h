// Helpers for the CLI suite: fixture discovery, file reading, running the built binary, a small XML checker.
#pragma once

#include <string>
#include <vector>

#include "allocscope/snapshot.h"

namespace clitest {

std::string fixtures_dir();                         // ALLOCSCOPE_FIXTURES
// expected/NAME.KIND (or .KIND.gz when only that exists); "external/NAME" reads external/expected/NAME.KIND.
std::string expected_path(const std::string& name, const std::string& kind);
// A golden file's text, inflated when it is gzipped; "" when unreadable.
std::string read_golden(const std::string& path);
bool file_exists(const std::string& path);
std::string read_text(const std::string& path);     // whole file; "" when unreadable
void write_bytes(const std::string& path, const std::string& bytes);
std::string temp_path(const std::string& leaf);     // a fresh path under the test's temp dir

// Fixture snapshot files (NAME.pickle or NAME.pickle.gz, and external/NAME.pickle.gz), by NAME.
std::vector<std::string> fixture_names();
std::string snapshot_path(const std::string& name);
// Loads a fixture or fails the current test (loaded once per process and cached).
const allocscope::Snapshot& fixture(const std::string& name);

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};
// Runs the built `allocscope` with `args` (each shell-quoted), capturing stdout and stderr; stdin reads `stdin_path`;
// `env`: NAME=value settings added to its environment.
RunResult run_cli(const std::vector<std::string>& args, const std::string& stdin_path = "/dev/null",
                  const std::vector<std::string>& env = {});

// Splits text into lines (without the '\n'); a final line without '\n' is kept.
std::vector<std::string> lines(const std::string& text);

// A strict-enough XML well-formedness check: balanced tags, one root, quoted attributes, known entities, no stray
// '<' or '&'. Returns "" when well-formed, else what is wrong and where.
std::string xml_problem(const std::string& xml);

}  // namespace clitest
