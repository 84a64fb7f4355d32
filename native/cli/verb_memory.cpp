// `allocscope memory FILE [-o x.svg]`: PyTorch's `_memory_viz memory` flame graph (which code holds memory).
#include <string>
#include <vector>

#include "allocscope/memviz.h"
#include "cli_common.h"
#include "verb_memviz_common.h"
#include "verbs.h"

namespace allocscope::cli {
namespace {

int run_memory(const std::vector<std::string>& argv) {
  Args args = parse_args(argv, {"o", "output"});
  if (!only_output_option("memory", &args)) return 1;
  if (args.positional.size() != 1) return fail("usage: allocscope memory FILE [-o out.svg]");
  Snapshot s;
  if (!load_or_report(args.positional[0], &s)) return 1;
  return emit_folded(args, memviz::memory_folded(s), "Memory: " + args.positional[0]);
}

const RegisterVerb kRegister({
    "memory",
    "flame graph of the code locations holding CUDA memory (= _memory_viz memory)",
    "usage: allocscope memory FILE [-o out.svg]\n\n"
    "The flame graph of `python -m torch.cuda._memory_viz memory`: like `segments` without the segment level,\n"
    "so blocks allocated by the same code merge:\n"
    "  stream_S;STATE;file.py:LINE:function;... BYTES\n\n"
    "Without -o the folded lines go to stdout, identical to the lines PyTorch feeds flamegraph.pl.\n"
    "  -o, --output FILE   write an SVG flame graph instead (rendered here; nothing is downloaded)\n"
    "\nFILE may be - to read a snapshot (pickle or gzip) from stdin, as PyTorch allows.\n",
    run_memory,
    53,
});

}  // namespace
}  // namespace allocscope::cli
