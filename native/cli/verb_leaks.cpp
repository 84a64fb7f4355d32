// `allocscope leaks FILE`: what survives each iteration, which sites grow (a leak) and which gradients are held.
#include <string>
#include <vector>

#include "cli_common.h"
#include "verbs.h"

namespace allocscope::cli {
namespace {

const RegisterVerb kRegister({
    "leaks",
    "what grows every iteration (a leak) and gradients held across steps; exit code 3 on a leak",
    "usage: allocscope leaks FILE [--device N] [--rule REGEX=CATEGORY]... [--json]\n\n"
    "Finds the repeating iteration (the START of each `Optimizer.step#...` annotation; otherwise the allocation\n"
    "stack that repeats most regularly), counts the allocations of each site (deepest user frame) alive at each\n"
    "iteration start, and reports sites whose count keeps rising (a leak: the line and the stack that allocated\n"
    "what stays alive; with guessed iterations, only growth still held when the trace ends, or at an OOM,\n"
    "counts, since a model's layers inside one forward pass repeat too), gradients alive from one optimizer\n"
    "step to the next (held, not growing: zero_grad missing), and the active bytes at each iteration start.\n"
    "Exit code 3 when a leak is suspected.\n\n"
    "  --device N             only device N; --device host: the file's pinned host memory (PyTorch 2.14+)\n"
    "  --rule REGEX=CATEGORY  categorize frames matching REGEX first (see `allocscope categories --help`)\n"
    "  --json                 {\"devices\": [leak reports]}\n\n"
    "example:\n"
    "  allocscope leaks tests/fixtures/transformer_leak.pickle\n",
    [](const std::vector<std::string>& argv) { return run_answer("leaks", argv); },
    12,
});

}  // namespace
}  // namespace allocscope::cli
