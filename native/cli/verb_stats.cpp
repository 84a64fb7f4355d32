// `allocscope stats FILE`: PyTorch's `_memory_viz stats` (segment fill bars and totals), byte for byte.
#include <cstdio>
#include <string>
#include <vector>

#include "allocscope/memviz.h"
#include "cli_common.h"
#include "verb_memviz_common.h"
#include "verbs.h"

namespace allocscope::cli {
namespace {

int run_stats(const std::vector<std::string>& argv) {
  const Args args = parse_args(argv, {});
  if (args.positional.size() != 1 || !args.options.empty()) return fail("usage: allocscope stats FILE");
  Snapshot s;
  if (!load_or_report(args.positional[0], &s)) return 1;
  const std::string text = memviz::stats(s);
  const std::string notes = memviz::stats_notes(s);
  std::fwrite(notes.data(), 1, notes.size(), stderr);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

const RegisterVerb kRegister({
    "stats",
    "segment fill bars and reserved/allocated/free totals (= python -m torch.cuda._memory_viz stats)",
    "usage: allocscope stats FILE\n\n"
    "Prints what `python -m torch.cuda._memory_viz stats FILE` prints: one bar per segment of at least 20 MiB\n"
    "(one character per 20 MiB page: a letter when one block fills it, a digit for tenths filled by several\n"
    "blocks, '*' when full, ' ' when free), then the segment count and total reserved, allocated and free bytes,\n"
    "with the share of free memory lost to the allocator's rounding (\"internal\"). Output is byte-identical to\n"
    "PyTorch's segsum() (PyTorch's own CLI adds one more empty line through print()).\n"
    "\nFILE may be - to read a snapshot (pickle or gzip) from stdin, as PyTorch allows.\n",
    run_stats,
    50,
});

}  // namespace
}  // namespace allocscope::cli
