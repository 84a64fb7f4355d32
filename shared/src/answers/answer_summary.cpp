// `summary`: the one-screen answer (peaks, fragmentation, top sites, warnings).
#include "allocscope/summary.h"
#include "answer_defs.h"

namespace allocscope::answers {
namespace {

Status check(const AnswerOptions& o) {
  uint32_t top = 0;
  if (!parse_count(o.get("top", "5"), &top)) return fail("summary", "--top needs a number from 0 to 4294967295");
  return {};
}

Result<AnswerOutput> run(Files files, const AnswerOptions& o) {
  LoadedSnapshot& f = *files[0];
  uint32_t top = 5;
  parse_count(o.get("top", "5"), &top);
  // Without lifetimes built yet (the CLI), summarize builds them on one core and the segment timelines on the other.
  const Summary sum = f.lifetimes_if_built() ? summarize(f.snapshot(), *f.lifetimes_if_built(), f.frame_filter(), top)
                                             : summarize(f.snapshot(), f.frame_filter(), top);
  AnswerOutput out;
  // The JSON names the snapshot it summarises, so `allocscope ranks` can gather summaries made where the files are.
  out.out = o.has("json") ? "{\"file\":" + json_string(f.name()) + "," + to_json(f.snapshot(), sum).substr(1) + "\n"
                          : printable(f.name()) + ": " + to_text(f.snapshot(), sum);
  return out;
}

}  // namespace

const AnswerDef& summary_answer() {
  static const AnswerDef d{{"summary", {"json"}, {"top"}, 1, 1, "usage: allocscope summary FILE [--json] [--top N]"},
                           check, run};
  return d;
}

}  // namespace allocscope::answers
