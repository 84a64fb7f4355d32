// `plan`: what to change so the job fits the GPU (or what cuts its peak most), cheapest first.
#include <cstdlib>

#include "allocscope/categories.h"
#include "allocscope/iterations.h"
#include "allocscope/plan.h"
#include "answer_defs.h"

namespace allocscope::answers {
namespace {

Result<PlanOptions> parse(const AnswerOptions& o) {
  PlanOptions p;
  if (o.has("gpu")) {
    auto g = parse_gpu_capacity(o.get("gpu"));
    if (!g.ok()) return fail("plan", g.error().describe());
    p.gpu = g.value();
  }
  if (o.has("world-size")) {
    uint32_t w = 0;
    if (!parse_count(o.get("world-size"), &w) || w < 2) return fail("plan", "--world-size takes the GPUs, 2 or more");
    p.world_size = w;
  }
  if (o.has("top") && (!parse_count(o.get("top"), &p.max_options) || p.max_options == 0))
    return fail("plan", "--top takes a number of options, 1 or more");
  uint32_t device = 0;
  if (o.has("device") && !parse_count(o.get("device"), &device)) return fail("plan", "--device needs an ordinal");
  return p;
}

Result<AnswerOutput> run(Files files, const AnswerOptions& o) {
  auto po = parse(o);
  if (!po.ok()) return po.error();
  LoadedSnapshot& f = *files[0];
  const Snapshot& s = f.snapshot();
  const DeviceLifetimes* lt = device_to_predict(f, o);
  if (!lt && !f.lifetimes().devices.empty() && !o.has("device"))
    return fail("plan", f.name() + " holds segments but no trace: a plan predicts the run from the allocations it "
                "recorded. Record with torch.cuda.memory._record_memory_history() before the first step");
  if (!lt) return no_device("plan", f, o.get("device"), o.has("json"));
  auto c = categorize(s, *lt, detect_iterations(s, *lt), f.frame_filter());
  if (!c.ok()) return fail("plan", c.error().describe());
  const Plan p = plan(s, *lt, c.value(), po.value());
  AnswerOutput out;
  out.out = o.has("json") ? to_json(p) + "\n" : predicted_device_line(f, *lt, o) + to_text(p);
  return out;
}

}  // namespace

const AnswerDef& plan_answer() {
  static const AnswerDef d{{"plan", {"json"}, {"gpu", "device", "world-size", "top"}, 1, 1,
                            "usage: allocscope plan FILE [--gpu NAME|SIZE] [--world-size N] [--device N] [--json]"},
                           [](const AnswerOptions& o) { return status_of(parse(o)); }, run};
  return d;
}

}  // namespace allocscope::answers
