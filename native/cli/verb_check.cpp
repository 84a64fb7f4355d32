// `allocscope check BASELINE NEW`: the CI gate (status 3 when the peak or a leak regressed).
#include <string>
#include <vector>

#include "cli_common.h"
#include "verbs.h"

namespace allocscope::cli {
namespace {

const RegisterVerb kRegister({
    "check",
    "CI gate: fails (exit 3) when NEW's peak grew past a limit over BASELINE's, or NEW leaks where BASELINE did not",
    "usage: allocscope check BASELINE NEW [--max-peak-growth 5%] [--max-reserved-growth P] [--device N] [--top N]\n"
    "                        [--json]\n\n"
    "Compares two snapshots of the same job (the main branch's and a change's, say), device by device:\n"
    "  - the allocated peak (live allocations in requested bytes, as `peak` reports it): a growth above\n"
    "    --max-peak-growth (default 5%) is a regression;\n"
    "  - the reserved peak (segments): gated only with --max-reserved-growth;\n"
    "  - leaks (as `leaks` finds them): a site that grows every iteration in NEW and not in BASELINE is a\n"
    "    regression; a leak at a site the baseline also leaks at is listed, not failed.\n"
    "It lists the N sites (default 5) whose bytes at the peak changed most, largest growth first, with their\n"
    "category. Sites are matched by file and function, not line, so a change that moves lines still pairs them.\n"
    "Exit status: 0 pass, 3 a regression (each one named on a `regression:` line), 1 an error.\n\n"
    "  --max-peak-growth P      allowed growth of the allocated peak, in percent (5%, 0.5, ...)\n"
    "  --max-reserved-growth P  allowed growth of the reserved peak (default: not gated)\n"
    "  --device N               only device N (default: every device with a trace in both)\n"
    "  --json                   {pass, baseline, new, limits, devices[{device, peak_allocated, peak_reserved,\n"
    "                           sites[], new_leaks[], known_leaks[]}], regressions[]}\n\n"
    "example (a CI job):\n"
    "  python train.py --steps 20 --snapshot new.pickle.gz\n"
    "  allocscope check baseline.pickle.gz new.pickle.gz --max-peak-growth 5%\n",
    [](const std::vector<std::string>& argv) { return run_answer("check", argv); },
    17,
});

}  // namespace
}  // namespace allocscope::cli
