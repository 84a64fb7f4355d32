// `allocscope export --json FILE`: every answer for every device as one JSON document, for scripts.
#include <string>
#include <vector>

#include "cli_common.h"
#include "verbs.h"

namespace allocscope::cli {
namespace {

const RegisterVerb kRegister({
    "export",
    "every answer (summary, per-device peak/categories/leaks, OOMs) as one JSON document",
    "usage: allocscope export --json FILE [--tree] [--rule REGEX=CATEGORY]...\n\n"
    "Writes {file, summary, devices: [{device, peak, categories, leaks}], ooms} to stdout: the same objects\n"
    "`summary --json`, `peak --json`, `categories --json`, `leaks --json` and `oom --json` print, for scripts\n"
    "(devices: those `peak` answers; leaks is null for a device without a trace, which `leaks` refuses). The\n"
    "exit code is 0 whatever the answers say (`leaks` exits 3 on a leak; here read devices[].leaks).\n\n"
    "  --tree                 include each peak's stack tree (flat preorder arrays; larger output)\n"
    "  --rule REGEX=CATEGORY  a user rule for categories, as `categories --rule`: it applies to every category\n"
    "                         shown, the peak's breakdown included (`peak` itself takes no rules)\n\n"
    "example:\n"
    "  allocscope export --json tests/fixtures/resnet50_train.pickle > answers.json\n",
    [](const std::vector<std::string>& argv) { return run_answer("export", argv); },
    16,
});

}  // namespace
}  // namespace allocscope::cli
