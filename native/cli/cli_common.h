// Helpers every verb shares: loading a snapshot with progress on a terminal, one-line errors, simple flag parsing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "allocscope/snapshot.h"

namespace allocscope::cli {

// Loads `path` (pickle or gzip). On error prints "allocscope: PATH: at byte N: ..." to stderr and returns false.
// Shows progress on stderr only when stderr is a terminal.
bool load_or_report(const std::string& path, Snapshot* out);

// Parsed command line: positional arguments and --flag / --flag=value / --flag value options.
struct Args {
  std::vector<std::string> positional;
  std::vector<std::pair<std::string, std::string>> options;  // name without dashes -> value ("" for switches)
  bool has(const std::string& name) const;
  std::string get(const std::string& name, const std::string& fallback = "") const;
};
// `takes_value` lists options that consume the next argument (e.g. {"o", "output", "device"}).
Args parse_args(const std::vector<std::string>& argv, const std::vector<std::string>& takes_value);

// Prints "allocscope: MESSAGE" to stderr and returns exit code 1.
int fail(const std::string& message);

}  // namespace allocscope::cli
