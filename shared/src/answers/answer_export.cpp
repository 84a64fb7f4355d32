// `export`: every answer for every device as one JSON document, for scripts.
#include "allocscope/categories.h"
#include "allocscope/iterations.h"
#include "allocscope/leaks.h"
#include "allocscope/oom.h"
#include "allocscope/peak.h"
#include "allocscope/segment_timeline.h"
#include "allocscope/summary.h"
#include "answer_defs.h"

namespace allocscope::answers {
namespace {

Result<CategoryOptions> parse(const AnswerOptions& o) {
  CategoryOptions co;
  ALLOCSCOPE_RETURN_IF_ERROR(parse_rules("export", o, &co));
  if (!o.has("json")) return Error{"usage: allocscope export --json FILE [--tree] [--rule REGEX=CATEGORY]..."};
  return co;
}

Result<AnswerOutput> run(Files files, const AnswerOptions& o) {
  auto co = parse(o);
  if (!co.ok()) return co.error();
  LoadedSnapshot& f = *files[0];
  const Snapshot& s = f.snapshot();
  const Lifetimes& all = f.lifetimes();
  const FrameFilter& ff = f.frame_filter();
  // Each part is already a JSON document from the shared core; the export only nests them.
  AnswerOutput out;
  out.out = "{\"file\":" + json_string(f.name()) + ",\"summary\":" + to_json(s, summarize(s, all, ff, 5, co.value())) +
            ",\"devices\":[";
  bool first = true;
  for (const DeviceLifetimes& lt : all.devices) {
    if (!answered_without_device(all, lt)) continue;  // as `peak` and `categories` leave it out
    const SegmentTimeline st = build_segment_timeline(s, lt.device);
    const Iterations it = detect_iterations(s, lt);
    auto c = categorize(s, lt, it, ff, co.value());
    if (!c.ok()) return fail("export", c.error().describe());
    const Peak p = find_peak(s, lt, &st, ff, &c.value());
    out.out += std::string(first ? "" : ",") + "{\"device\":" + std::to_string(lt.device) +
               ",\"peak\":" + to_json(s, lt, p, o.has("tree")) +
               ",\"categories\":" + to_json(s, lt, c.value(), p.allocated_step) +
               ",\"leaks\":" + (lt.event_count ? to_json(s, find_leaks(s, lt, it, c.value(), ff)) : "null") + "}";
    first = false;
  }
  out.out += "],\"ooms\":" + to_json(s, all, analyze_ooms(s, all)) + "}\n";
  if (std::string note = devices_left_out("export", all); !note.empty()) out.notes.push_back(note);
  return out;
}

}  // namespace

const AnswerDef& export_answer() {
  static const AnswerDef d{{"export", {"json", "tree"}, {"rule"}, 1, 1,
                            "usage: allocscope export --json FILE [--tree] [--rule REGEX=CATEGORY]..."},
                           [](const AnswerOptions& o) { return status_of(parse(o)); }, run};
  return d;
}

}  // namespace allocscope::answers
