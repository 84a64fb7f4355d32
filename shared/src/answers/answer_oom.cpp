// `oom`: at each out-of-memory event, the request against free memory, the cause, and what was alive.
#include "allocscope/oom.h"
#include "answer_defs.h"

namespace allocscope::answers {
namespace {

Result<OomOptions> parse(const AnswerOptions& o) {
  OomOptions options;
  if (!parse_count(o.get("top", "10"), &options.top)) return fail("oom", "--top needs a number from 0 to 4294967295");
  if (o.has("gpu")) {
    auto gpu = parse_gpu_capacity(o.get("gpu"));
    if (!gpu.ok()) return fail("oom", gpu.error().describe());
    options.gpu = gpu.value();
  }
  return options;
}

Result<AnswerOutput> run(Files files, const AnswerOptions& o) {
  auto options = parse(o);
  if (!options.ok()) return options.error();
  LoadedSnapshot& f = *files[0];
  const auto reports = analyze_ooms(f.snapshot(), f.lifetimes(), options.value());
  AnswerOutput out;
  out.out = o.has("json") ? "{\"ooms\":" + to_json(f.snapshot(), f.lifetimes(), reports) + "}\n"
                          : to_text(f.snapshot(), f.lifetimes(), reports);
  return out;
}

}  // namespace

const AnswerDef& oom_answer() {
  static const AnswerDef d{{"oom", {"json"}, {"top", "gpu"}, 1, 1, "usage: allocscope oom FILE [--top N] [--gpu NAME|SIZE] [--json]"},
                           [](const AnswerOptions& o) { return status_of(parse(o)); }, run};
  return d;
}

}  // namespace allocscope::answers
