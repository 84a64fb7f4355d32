// `allocscope trace FILE`: PyTorch's `_memory_viz trace` (events as pseudo-Python) with a correct TOTAL MEM line.
#include <cstdio>
#include <string>
#include <vector>

#include "allocscope/memviz.h"
#include "cli_common.h"
#include "verb_memviz_common.h"
#include "verbs.h"

namespace allocscope::cli {
namespace {

int run_trace(const std::vector<std::string>& argv) {
  const Args args = parse_args(argv, {});
  for (const auto& [name, value] : args.options)
    if (name != "pytorch-total") return fail("trace: unknown option --" + name + " (see allocscope trace --help)");
  if (args.positional.size() != 1) return fail("usage: allocscope trace [--pytorch-total] FILE");
  Snapshot s;
  if (!load_or_report(args.positional[0], &s)) return 1;
  memviz::TraceOptions options;
  options.pytorch_total = args.has("pytorch-total");
  const std::string text = memviz::trace(s, options);
  const std::string notes = memviz::trace_notes(s);
  std::fwrite(notes.data(), 1, notes.size(), stderr);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

const RegisterVerb kRegister({
    "trace",
    "the recorded events as pseudo-Python, a = cudaMalloc(...) / del a (= _memory_viz trace)",
    "usage: allocscope trace [--pytorch-total] FILE\n\n"
    "Prints what `python -m torch.cuda._memory_viz trace FILE` prints, per device with events:\n"
    "  a = cudaMalloc(ADDR, SIZE)        a segment allocated from CUDA\n"
    "  b = a[OFFSET:SIZE]                an allocation inside segment a (seg_N: the file's Nth segment;\n"
    "                                    MEM[ADDR:SIZE]: no known segment)\n"
    "  del b # SIZE / # free completed   a free requested, then completed (after stream events)\n"
    "  cudaFree(a) # SIZE                a segment returned to CUDA\n"
    "  raise OutOfMemoryError # ...      an out-of-memory failure with the driver's free bytes\n"
    "  {...}                             any other event (e.g. segment_map), as a Python dict\n\n"
    "One line differs from PyTorch: `TOTAL MEM`. PyTorch reuses the loop index as its byte counter, so its value\n"
    "is meaningless; ours is the bytes allocated minus the bytes whose free completed in that device's trace (the\n"
    "net change over the recorded window), followed by a newline. See docs/cli.md.\n\n"
    "  --pytorch-total   print PyTorch's TOTAL MEM value (and its missing newline) for exact diffs\n"
    "\nFILE may be - to read a snapshot (pickle or gzip) from stdin, as PyTorch allows.\n",
    run_trace,
    51,
});

}  // namespace
}  // namespace allocscope::cli
