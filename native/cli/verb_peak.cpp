// `allocscope peak FILE`: the highest allocated and reserved bytes (globally or in a step window) and what was
// alive at the allocated peak, by category, site, size and (optionally) as a stack tree.
#include <string>
#include <vector>

#include "cli_common.h"
#include "verbs.h"

namespace allocscope::cli {
namespace {

const RegisterVerb kRegister({
    "peak",
    "peak allocated/reserved bytes and what was alive then (by category, site, stack)",
    "usage: allocscope peak FILE [--device N] [--from A] [--to B] [--top N] [--tree [--depth D]] [--json]\n\n"
    "The highest allocated (active) bytes, as PyTorch's Active Memory Timeline draws them, and the highest\n"
    "reserved bytes (segments), each with its step (step s = the state after the first s events). What is\n"
    "alive at the allocated peak is grouped by category (parameter, gradient, optimizer_state, activation,\n"
    "input, temporary, autograd_detail, unknown), by site (the deepest frame of the user's own code) and listed by size.\n\n"
    "  --from, --to A, B  load and search only steps A..B of each device's trace (whole numbers), or its\n"
    "                     times since the trace's first entry (1.5s, 200ms, 300us); either end may be left\n"
    "                     out. A file of 100M events is read through once and holds only the window and\n"
    "                     what is alive in memory; steps printed are the file's\n"
    "  --device N         only device N (default: every device with a trace; those with segments only\n"
    "                     are named on stderr); --device host: the file's pinned host memory\n"
    "  --top N            rows in the site and size lists (default 20)\n"
    "  --tree             the alive allocations as a stack tree (in JSON: flat preorder arrays)\n"
    "  --depth D          tree levels printed as text (default 6)\n"
    "  --json             {\"devices\": [peak objects]}\n\n"
    "example:\n"
    "  allocscope peak tests/fixtures/resnet50_train.pickle --from 4000 --to 6000\n"
    "  allocscope peak huge.pickle --from 2s --to 2.5s\n",
    [](const std::vector<std::string>& argv) { return run_answer("peak", argv); },
    11,
});

}  // namespace
}  // namespace allocscope::cli
