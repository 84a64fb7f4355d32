// `allocscope merge CAPTURE PYTORCH -o OUT`: one snapshot of everything a PyTorch job held, from the capture's file
// and PyTorch's own (outside.h). `record` does this by itself in Python jobs; the verb is for files made apart.
#include <cstdio>
#include <string>
#include <vector>

#include "allocscope/loader.h"
#include "allocscope/outside.h"
#include "allocscope/owners.h"
#include "allocscope/writer.h"
#include "cli_common.h"
#include "verbs.h"

namespace allocscope::cli {
namespace {

const char kUsage[] =
    "usage: allocscope merge CAPTURE PYTORCH -o OUTPUT\n\n"
    "Writes PyTorch's snapshot PYTORCH (torch.cuda.memory._dump_snapshot) with the device memory that CAPTURE\n"
    "(`allocscope record`) saw outside PyTorch's caching allocator added under the key `allocscope_outside`:\n"
    "NCCL buffers, cuBLAS workspaces, CUDA graphs, other libraries, the job's own cudaMalloc calls. PyTorch's part\n"
    "is kept byte for byte, so PyTorch's _memory_viz and MemoryViz read OUTPUT as they read PYTORCH; allocscope\n"
    "also shows the outside memory (summary: device memory by owner at the peak). Both files must come from the\n"
    "same process: the merge is refused when their times do not overlap, or when none of the memory PyTorch\n"
    "reserved is among the capture's allocations. What PyTorch's own record shows it reserved (same device,\n"
    "address and size) is PyTorch's even without stacks. OUTPUT ending in .gz is gzipped.\n\n"
    "`allocscope record -- python3 job.py` writes the merged snapshot by itself; this is for files made apart.\n\n"
    "example:\n"
    "  allocscope merge allocscope-1234.pickle torch.pickle -o merged.pickle.gz\n";

int run_merge(const std::vector<std::string>& argv) {
  const Args args = parse_args(argv, {"o", "output"});
  for (const auto& [name, value] : args.options)
    if (name != "o" && name != "output") return fail("merge: unknown option --" + name + " (see allocscope merge --help)");
  const std::string out = args.get("o", args.get("output"));
  if (args.positional.size() != 2 || out.empty()) return fail("usage: allocscope merge CAPTURE PYTORCH -o OUTPUT");
  const std::string& capture_path = args.positional[0];
  const std::string& torch_path = args.positional[1];
  Snapshot capture;
  if (!load_or_report(capture_path, &capture)) return 1;
  if (!is_capture(capture))
    return fail(capture_path + ": not written by allocscope's capture (no allocator_settings.allocscope_capture)");
  auto bytes = read_snapshot_bytes(torch_path);
  if (!bytes.ok()) return fail(bytes.error().describe());
  std::vector<uint8_t> torch = std::move(bytes).value();
  if (is_gzip(torch)) {
    // Parsed as it inflates first, so that a file that is no snapshot stops at its first bad byte: inflated whole
    // first, a 1 MB gzip of zeros held 2.1 GB before the pickle was looked at (an audit). The merge then needs the
    // inflated bytes whole, to keep them as they are.
    if (auto streamed = load_snapshot(torch); !streamed.ok())
      return fail(torch_path + ": PyTorch's snapshot: " + streamed.error().describe());
    auto raw = gunzip(torch);
    if (!raw.ok()) return fail(torch_path + ": " + raw.error().describe());
    torch = std::move(raw).value();
  }
  auto merged = merge_capture(torch, capture);  // says so when the two are swapped, or come from two processes
  if (!merged.ok()) return fail(torch_path + ": " + merged.error().describe());
  const size_t n = merged.value().bytes.size();
  if (merged.value().after_stop)
    std::fprintf(stderr, "allocscope merge: %s: left out %llu byte(s) after the pickle's STOP opcode (no unpickler "
                 "reads them)\n", torch_path.c_str(), static_cast<unsigned long long>(merged.value().after_stop));
  const Status st = write_pickle_file(std::move(merged.value().bytes), out);
  if (!st.ok()) return fail(st.error().describe());
  std::fprintf(stderr, "allocscope merge: wrote %s (%zu bytes before compression)\n", out.c_str(), n);
  return 0;
}

const RegisterVerb kRegister({"merge", "add a capture's memory outside PyTorch's allocator to PyTorch's snapshot",
                              kUsage, run_merge, 91});

}  // namespace
}  // namespace allocscope::cli
