// `allocscope segments FILE [-o x.svg]`: PyTorch's `_memory_viz segments` flame graph (what fills each segment).
#include <string>
#include <vector>

#include "allocscope/memviz.h"
#include "cli_common.h"
#include "verb_memviz_common.h"
#include "verbs.h"

namespace allocscope::cli {
namespace {

int run_segments(const std::vector<std::string>& argv) {
  Args args = parse_args(argv, {"o", "output"});
  if (!only_output_option("segments", &args)) return 1;
  if (args.positional.size() != 1) return fail("usage: allocscope segments FILE [-o out.svg]");
  Snapshot s;
  if (!load_or_report(args.positional[0], &s)) return 1;
  return emit_folded(args, memviz::segments_folded(s), "Segments: " + args.positional[0]);
}

const RegisterVerb kRegister({
    "segments",
    "flame graph of what fills each allocator segment (= _memory_viz segments)",
    "usage: allocscope segments FILE [-o out.svg]\n\n"
    "The flame graph of `python -m torch.cuda._memory_viz segments`: one line per block,\n"
    "  stream_S;seg_ADDR;STATE;file.py:LINE:function;... BYTES\n"
    "with the allocating stack outermost first (interpreter and dispatcher frames hidden, as PyTorch does),\n"
    "<non-python> when the block has no stack, and a <gaps> line for rounding (size - requested size).\n\n"
    "Without -o the folded lines go to stdout, identical to the lines PyTorch feeds flamegraph.pl.\n"
    "  -o, --output FILE   write an SVG flame graph instead (rendered here; nothing is downloaded)\n"
    "\nFILE may be - to read a snapshot (pickle or gzip) from stdin, as PyTorch allows.\n",
    run_segments,
    52,
});

}  // namespace
}  // namespace allocscope::cli
