// The `allocscope` CLI's verb registry: each verb lives in its own verb_<name>.cpp and registers itself, so adding a
// verb never touches main.cpp.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace allocscope::cli {

struct Verb {
  const char* name;
  const char* summary;  // one line for `allocscope --help`
  const char* usage;    // full text for `allocscope VERB --help`
  int (*run)(const std::vector<std::string>& args);  // args exclude the verb; returns the exit code
  int order;            // position in `--help` (smaller first)
};

// Registers a verb at static-initialisation time.
struct RegisterVerb {
  explicit RegisterVerb(const Verb& v);
};
const std::vector<Verb>& all_verbs();

}  // namespace allocscope::cli
