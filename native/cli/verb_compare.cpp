// `allocscope compare A B [-o x.svg]`: PyTorch's `_memory_viz compare` (segments present in only one snapshot).
#include <cstdio>
#include <string>
#include <vector>

#include "allocscope/memviz.h"
#include "cli_common.h"
#include "verb_memviz_common.h"
#include "verbs.h"

namespace allocscope::cli {
namespace {

int run_compare(const std::vector<std::string>& argv) {
  Args args = parse_args(argv, {"o", "output"});
  if (!only_output_option("compare", &args)) return 1;
  if (args.positional.size() != 2) return fail("usage: allocscope compare BEFORE AFTER [-o out.svg]");
  Snapshot before, after;
  if (!load_or_report(args.positional[0], &before)) return 1;
  if (!load_or_report(args.positional[1], &after)) return 1;
  const memviz::CompareResult r = memviz::compare(before, after);
  // PyTorch prints the two address lists on stdout and writes the graph to a file. When the folded lines take
  // stdout instead, the lists go to stderr so the stdout stays pure folded stacks for flamegraph tools.
  const bool to_file = args.has("o") || args.has("output");
  std::fputs(r.summary.c_str(), to_file ? stdout : stderr);
  if (to_file) std::fflush(stdout);
  return emit_folded(args, r.folded, "Compare: " + args.positional[0] + " -> " + args.positional[1]);
}

const RegisterVerb kRegister({
    "compare",
    "segments only in one of two snapshots, as a flame graph (= _memory_viz compare)",
    "usage: allocscope compare BEFORE AFTER [-o out.svg]\n\n"
    "What `python -m torch.cuda._memory_viz compare` means to do (PyTorch 2.11's CLI crashes with TypeError\n"
    "before printing anything): a segment is the same in both files when its address and total size match;\n"
    "the others are listed as\n"
    "  only_before = [ADDR, ...]\n"
    "  only_after = [ADDR, ...]\n"
    "(in file order; PyTorch would use Python set order) and their blocks become folded lines\n"
    "  only_before;stream_S;seg_ADDR;STATE;file.py:LINE:function;... BYTES   (then only_after;...)\n\n"
    "Without -o the folded lines go to stdout and the two lists to stderr.\n"
    "  -o, --output FILE   write an SVG flame graph; the two lists go to stdout, as PyTorch prints them\n"
    "\nBEFORE or AFTER may be - to read a snapshot (pickle or gzip) from stdin, as PyTorch allows.\n",
    run_compare,
    54,
});

}  // namespace
}  // namespace allocscope::cli
