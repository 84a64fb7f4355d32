// Entry point of the `allocscope` command-line tool: dispatches to the registered verbs.
#include <cerrno>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli_common.h"
#include "verbs.h"

namespace allocscope::cli {

static std::vector<Verb>& registry() {
  static std::vector<Verb> verbs;
  return verbs;
}
RegisterVerb::RegisterVerb(const Verb& v) { registry().push_back(v); }
const std::vector<Verb>& all_verbs() { return registry(); }

static void print_help(FILE* out) {
  std::fprintf(out,
               "allocscope: answers from PyTorch CUDA memory snapshots (peak, leaks, OOM, diff), offline.\n\n"
               "usage: allocscope VERB [options] FILE...\n"
               "       allocscope VERB --help     details of one verb\n\n"
               "FILE is a snapshot from torch.cuda.memory._dump_snapshot() (.pickle, or gzipped).\n\nverbs:\n");
  std::vector<Verb> verbs = registry();
  std::stable_sort(verbs.begin(), verbs.end(), [](const Verb& a, const Verb& b) { return a.order < b.order; });
  for (const Verb& v : verbs) std::fprintf(out, "  %-11s %s\n", v.name, v.summary);
}

}  // namespace allocscope::cli

int main(int argc, char** argv) {
  using namespace allocscope::cli;
  guard_terminal_output();
  guard_mapped_inputs();
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    print_help(stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "--version")) {
    std::printf("allocscope 0.1.0\n");
    return 0;
  }
  for (const Verb& v : all_verbs()) {
    if (std::strcmp(v.name, argv[1]) != 0) continue;
    std::vector<std::string> args(argv + 2, argv + argc);
    for (const std::string& a : args) {
      if (a == "--help" || a == "-h") {
        std::fputs(v.usage, stdout);
        return 0;
      }
    }
    if (!take_host_device(v.name, &args)) return 1;
    if (!take_window(v.name, &args)) return 1;
    // Running out of memory on a hostile or enormous file is an answer to give in one line, not an abort: the
    // loader's bounds keep what a file can ask for proportional to its size, but a large file can still need more
    // than the machine has (an audit: a 163 KB .gz of 14M tiny rows needed 4.1 GB for `summary`).
    int rc = 1;
    try {
      rc = v.run(args);
    } catch (const std::bad_alloc&) {
      std::fprintf(stderr, "allocscope %s: out of memory: this file needs more memory than the machine gives this "
                   "process (try a smaller trace: max_entries when recording)\n", v.name);
      return 1;
    } catch (const std::length_error&) {
      std::fprintf(stderr, "allocscope %s: out of memory: a table would exceed what this build can hold\n", v.name);
      return 1;
    }
    // A verb checks its last flush, but a large output is written past stdio's buffer at once and its error never
    // reaches that flush: without this, a full disk or a closed pipe left a truncated answer and exit code 0.
    errno = 0;
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
      std::fprintf(stderr, "allocscope %s: writing the output failed%s%s\n", v.name, errno ? ": " : "",
                   errno ? std::strerror(errno) : "");
      return rc == 0 || rc == 3 ? 1 : rc;
    }
    return rc;
  }
  std::fprintf(stderr, "allocscope: unknown verb '%s' (see allocscope --help)\n", argv[1]);
  return 2;
}
