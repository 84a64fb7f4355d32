// `diff`: two snapshots' live memory by stack with deltas (largest first) and the segments only in one of them.
#include "allocscope/diff.h"
#include "answer_defs.h"

namespace allocscope::answers {
namespace {

Status check(const AnswerOptions& o) {
  uint32_t top = 0;
  if (!parse_count(o.get("top", "15"), &top)) return fail("diff", "--top needs a number from 0 to 4294967295");
  return {};
}

Result<AnswerOutput> run(Files files, const AnswerOptions& o) {
  const bool json = o.has("json");
  uint32_t top = 0;
  parse_count(o.get("top", json ? "50" : "15"), &top);
  LoadedSnapshot& a = *files[0];
  LoadedSnapshot& b = *files[1];
  const SnapshotDiff d = diff_snapshots(a.snapshot(), b.snapshot(), &a.lifetimes(), &b.lifetimes());
  AnswerOutput out;
  out.out = json ? to_json(d, top) + "\n" : to_text(d, a.name(), b.name(), top);
  return out;
}

}  // namespace

const AnswerDef& diff_answer() {
  static const AnswerDef d{{"diff", {"json"}, {"top"}, 2, 2, "usage: allocscope diff A B [--top N] [--json]"}, check, run};
  return d;
}

}  // namespace allocscope::answers
