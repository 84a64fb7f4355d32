// `allocscope categories FILE`: bytes per category (parameter, gradient, ...) at the peak or any step.
#include <string>
#include <vector>

#include "cli_common.h"
#include "verbs.h"

namespace allocscope::cli {
namespace {

const RegisterVerb kRegister({
    "categories",
    "memory by kind (parameter, gradient, optimizer_state, activation, input, temporary, autograd_detail, unknown)",
    "usage: allocscope categories FILE [--at peak|end|STEP] [--device N] [--rule REGEX=CATEGORY]... [--json]\n\n"
    "Infers each allocation's kind from its stack and lifetime (docs/analyses.md): torch/optim frames that\n"
    "outlive their iteration are optimizer state; module construction and moves (__init__, _apply, .to, .cuda)\n"
    "are parameters; what the backward pass leaves alive with a parameter's size is a gradient; what a\n"
    "module's forward makes is an activation (as PyTorch's Memory Profiler says, saved for backward or not);\n"
    "what else is freed within its iteration is temporary. Prints the bytes of each kind alive at the step (default: the allocated peak) with the three\n"
    "largest sites of each, so a wrong guess is easy to spot and correct with a rule.\n\n"
    "  --rule REGEX=CATEGORY  frames whose \"path/file.py:LINE:name\" matches REGEX (ECMAScript) decide first;\n"
    "                         repeatable, first match wins\n"
    "  --at peak|end|STEP     which state (default peak)\n"
    "  --json                 {\"devices\": [{device, step, alive{category: {bytes, count}}, all_allocations}]}\n\n"
    "example:\n"
    "  allocscope categories tests/fixtures/resnet18_grad_bug.pickle --rule 'my_cache\\.py=unknown'\n",
    [](const std::vector<std::string>& argv) { return run_answer("categories", argv); },
    15,
});

}  // namespace
}  // namespace allocscope::cli
