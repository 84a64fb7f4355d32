// `check BASELINE NEW`: a CI gate. Fails (status 3) when NEW's peak grew past a limit over BASELINE's, or when NEW
// leaks at a site BASELINE did not, and names what grew. Sites are matched by file and function, not line, since the
// change under test moves lines.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include <nlohmann/json.hpp>

#include "allocscope/categories.h"
#include "allocscope/iterations.h"
#include "allocscope/leaks.h"
#include "allocscope/memviz.h"
#include "allocscope/peak.h"
#include "allocscope/segment_timeline.h"
#include "answer_defs.h"

namespace allocscope::answers {
namespace {

using nlohmann::json;

struct Limits {
  double peak = 0.05;      // growth allowed in the allocated peak (a fraction)
  double reserved = -1;    // in the reserved peak; < 0: not checked
  int64_t device = -1;
  uint32_t top = 5;        // sites listed per device
};

// "5%", "5" (percent) or "0.5%": a percentage from 0 to 10000.
bool parse_percent(std::string text, double* out) {
  if (!text.empty() && text.back() == '%') text.pop_back();
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(v >= 0) || v > 10000) return false;
  *out = v / 100;
  return true;
}

Result<Limits> parse(const AnswerOptions& o) {
  Limits l;
  if (o.has("max-peak-growth") && !parse_percent(o.get("max-peak-growth"), &l.peak))
    return fail("check", "--max-peak-growth takes a percentage, e.g. 5%");
  if (o.has("max-reserved-growth") && !parse_percent(o.get("max-reserved-growth"), &l.reserved))
    return fail("check", "--max-reserved-growth takes a percentage, e.g. 10%");
  uint32_t v = 0;
  if (o.has("device")) {
    if (!parse_count(o.get("device"), &v)) return fail("check", "--device needs an ordinal");
    l.device = v;
  }
  if (o.has("top") && !parse_count(o.get("top"), &l.top)) return fail("check", "--top needs a number");
  return l;
}

// What one device holds at its allocated peak, by site (file and function: a key that survives moved lines).
struct DeviceState {
  int64_t device = 0;
  uint64_t peak_allocated = 0, peak_reserved = 0;
  uint32_t peak_step = 0;
  std::map<std::string, uint64_t> site_bytes;   // key: "file\x1ffunction"
  std::map<std::string, std::string> site_name;  // key -> "file:line:function" as answers print it
  std::map<std::string, std::string> site_category;
  std::map<std::string, uint64_t> leaking;       // growing sites -> bytes per iteration
  std::map<std::string, std::string> leak_name;
  bool leak_judged = false;
};

std::string site_key(const Snapshot& s, FrameId f) {
  if (f == kNoFrame || f >= s.frames.size()) return "";
  return std::string(s.strings.get(s.frames[f].filename)) + '\x1f' + std::string(s.strings.get(s.frames[f].name));
}
std::string site_label(const Snapshot& s, FrameId f) {
  return f == kNoFrame || f >= s.frames.size() ? "<no user frame>" : FrameFilter::format(s, f);
}

DeviceState state_of(LoadedSnapshot& f, const DeviceLifetimes& lt) {
  const Snapshot& s = f.snapshot();
  DeviceState d;
  d.device = lt.device;
  const SegmentTimeline st = build_segment_timeline(s, lt.device);
  const Iterations it = detect_iterations(s, lt);
  auto c = categorize(s, lt, it, f.frame_filter());
  PeakOptions po;
  po.top = UINT32_MAX;  // every site, so a site that grew from nothing is seen
  const Peak p = find_peak(s, lt, &st, f.frame_filter(), c.ok() ? &c.value() : nullptr, po);
  d.peak_allocated = p.allocated_bytes;
  d.peak_reserved = p.reserved_bytes;
  d.peak_step = p.allocated_step;
  for (size_t k = 0; k < p.site.size(); ++k) {
    const std::string key = site_key(s, p.site[k]);
    d.site_bytes[key] += p.site_bytes[k];
    d.site_name.emplace(key, site_label(s, p.site[k]));
  }
  if (c.ok()) {
    // Each site's category: that of its largest allocation alive at the peak (largest first).
    const FrameFilter& ff = f.frame_filter();
    for (size_t k = 0; k < p.largest.size() && k < p.largest_category.size(); ++k) {
      const std::string key = site_key(s, ff.site(lt.stack[p.largest[k]]));
      d.site_category.emplace(key, std::string(category_name(p.largest_category[k])));
    }
    if (lt.event_count > 0) {
      const LeakReport r = find_leaks(s, lt, it, c.value(), f.frame_filter());
      d.leak_judged = r.judged();
      if (r.leak_suspected())
        for (const LeakGroup& g : r.growing) {
          const std::string key = site_key(s, g.site);
          d.leaking[key] += g.bytes_per_iteration;
          d.leak_name.emplace(key, site_label(s, g.site));
        }
    }
  }
  return d;
}

std::string percent(double growth) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", 100 * growth);
  return buf;
}
double growth_of(uint64_t base, uint64_t now) {
  if (base == 0) return now == 0 ? 0 : INFINITY;
  return static_cast<double>(now) / static_cast<double>(base) - 1;
}
std::string signed_size(int64_t delta) {
  std::string sign(delta >= 0 ? "+" : "-");
  return sign + memviz::format_size(static_cast<uint64_t>(delta >= 0 ? delta : -delta));
}
json number_or_null(double v) { return std::isfinite(v) ? json(v) : json(); }

const DeviceLifetimes* single_traced(const Lifetimes& all) {
  const DeviceLifetimes* one = nullptr;
  for (const DeviceLifetimes& d : all.devices)
    if (d.event_count > 0) {
      if (one) return nullptr;
      one = &d;
    }
  return one;
}

Result<AnswerOutput> run(Files files, const AnswerOptions& o) {
  auto lim = parse(o);
  if (!lim.ok()) return lim.error();
  const Limits& l = lim.value();
  LoadedSnapshot& base = *files[0];
  LoadedSnapshot& now = *files[1];
  json devices = json::array(), regressions = json::array();
  std::string text;
  std::vector<int64_t> only_base, only_new;
  // Two files of one traced device each are compared whatever their ordinals (a job moved to another GPU, or
  // two ranks); otherwise devices pair by ordinal.
  const DeviceLifetimes* only_base_traced = single_traced(base.lifetimes());
  const DeviceLifetimes* only_new_traced = single_traced(now.lifetimes());
  const bool pair_singles = l.device < 0 && only_base_traced && only_new_traced;
  for (const DeviceLifetimes& nl : now.lifetimes().devices) {
    if (l.device >= 0 ? nl.device != l.device : !answered_without_device(now.lifetimes(), nl)) continue;
    const DeviceLifetimes* bl = pair_singles ? only_base_traced : base.lifetimes().device(nl.device);
    if (!bl) {
      only_new.push_back(nl.device);
      continue;
    }
    const DeviceState b = state_of(base, *bl), n = state_of(now, nl);
    const double g = growth_of(b.peak_allocated, n.peak_allocated);
    const double gr = growth_of(b.peak_reserved, n.peak_reserved);
    const bool peak_bad = g > l.peak + 1e-12;
    const bool reserved_bad = l.reserved >= 0 && gr > l.reserved + 1e-12;
    // Sites by the change of their bytes at the two peaks, largest growth first.
    std::vector<std::pair<int64_t, std::string>> deltas;
    for (const auto& [key, bytes] : n.site_bytes) {
      auto it = b.site_bytes.find(key);
      deltas.push_back({static_cast<int64_t>(bytes) - static_cast<int64_t>(it == b.site_bytes.end() ? 0 : it->second), key});
    }
    for (const auto& [key, bytes] : b.site_bytes)
      if (!n.site_bytes.count(key)) deltas.push_back({-static_cast<int64_t>(bytes), key});
    std::stable_sort(deltas.begin(), deltas.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
    json sites = json::array();
    for (size_t k = 0; k < deltas.size() && sites.size() < l.top; ++k) {
      const std::string& key = deltas[k].second;
      if (deltas[k].first == 0) continue;
      const auto nb = n.site_bytes.find(key);
      const auto bb = b.site_bytes.find(key);
      const auto name = n.site_name.count(key) ? n.site_name.at(key) : b.site_name.at(key);
      const auto cat = n.site_category.count(key) ? n.site_category.at(key)
                       : b.site_category.count(key) ? b.site_category.at(key) : std::string("unknown");
      sites.push_back({{"site", name}, {"category", cat},
                       {"baseline_bytes", bb == b.site_bytes.end() ? 0 : bb->second},
                       {"new_bytes", nb == n.site_bytes.end() ? 0 : nb->second},
                       {"delta_bytes", deltas[k].first}});
    }
    json new_leaks = json::array(), known_leaks = json::array();
    for (const auto& [key, per_iter] : n.leaking) {
      json leak = {{"site", n.leak_name.at(key)}, {"bytes_per_iteration", per_iter}};
      (b.leaking.count(key) ? known_leaks : new_leaks).push_back(leak);
    }
    const std::string dev = bl->device == nl.device ? "device " + std::to_string(nl.device)
                                                    : "cuda:" + std::to_string(bl->device) + " -> cuda:" +
                                                          std::to_string(nl.device);
    const std::string grew_most = !sites.empty() && sites[0]["delta_bytes"].get<int64_t>() > 0
                                      ? sites[0]["site"].get<std::string>() + " " +
                                            signed_size(sites[0]["delta_bytes"].get<int64_t>())
                                      : std::string("no single site");
    if (peak_bad)
      regressions.push_back(dev + ": peak allocated grew " + percent(g) + " (" + memviz::format_size(b.peak_allocated) +
                            " -> " + memviz::format_size(n.peak_allocated) + "), more than the " + percent(l.peak).substr(1) +
                            " allowed; grew most: " + grew_most);
    if (reserved_bad)
      regressions.push_back(dev + ": peak reserved grew " + percent(gr) + " (" + memviz::format_size(b.peak_reserved) +
                            " -> " + memviz::format_size(n.peak_reserved) + "), more than the " +
                            percent(l.reserved).substr(1) + " allowed");
    for (const json& leak : new_leaks)
      regressions.push_back(dev + ": new leak at " + leak["site"].get<std::string>() + ", " +
                            memviz::format_size(leak["bytes_per_iteration"].get<uint64_t>()) +
                            " more each iteration (the baseline does not grow there)");
    devices.push_back({{"device", nl.device},
                       {"baseline_device", bl->device},
                       {"peak_allocated", {{"baseline", b.peak_allocated}, {"new", n.peak_allocated},
                                           {"growth", number_or_null(g)}, {"regressed", peak_bad}}},
                       {"peak_reserved", {{"baseline", b.peak_reserved}, {"new", n.peak_reserved},
                                          {"growth", number_or_null(gr)}, {"regressed", reserved_bad}}},
                       {"sites", sites},
                       {"new_leaks", new_leaks},
                       {"known_leaks", known_leaks},
                       {"leaks_judged", n.leak_judged}});
    text += dev + ": peak allocated " + memviz::format_size(b.peak_allocated) + " -> " +
            memviz::format_size(n.peak_allocated) + " (" + (std::isfinite(g) ? percent(g) : "new") + ", limit " +
            percent(l.peak).substr(1) + ")" + (peak_bad ? "  REGRESSED" : "  ok") + "\n";
    text += "          peak reserved  " + memviz::format_size(b.peak_reserved) + " -> " +
            memviz::format_size(n.peak_reserved) + " (" + (std::isfinite(gr) ? percent(gr) : "new") +
            (l.reserved >= 0 ? ", limit " + percent(l.reserved).substr(1) + ")" + (reserved_bad ? "  REGRESSED" : "  ok")
                             : ", not gated)") + "\n";
    for (const json& site : sites)
      text += "    " + signed_size(site["delta_bytes"].get<int64_t>()) + "  " + printable(site["site"].get<std::string>()) +
              "  [" + site["category"].get<std::string>() + "]\n";
    for (const json& leak : new_leaks)
      text += "    NEW LEAK " + printable(leak["site"].get<std::string>()) + "  +" +
              memviz::format_size(leak["bytes_per_iteration"].get<uint64_t>()) + "/iteration  REGRESSED\n";
    for (const json& leak : known_leaks)
      text += "    leak also in the baseline: " + printable(leak["site"].get<std::string>()) + "\n";
    if (!n.leak_judged && n.peak_allocated > 0)
      text += "    (leaks not judged: too few iterations in the new trace)\n";
  }
  for (const DeviceLifetimes& bl : base.lifetimes().devices)
    if (!pair_singles && (l.device < 0 || bl.device == l.device) && bl.event_count > 0 &&
        !now.lifetimes().device(bl.device))
      only_base.push_back(bl.device);
  if (devices.empty())
    return fail("check", "no device to compare: " + now.name() + " has devices " + device_list(now.lifetimes()) +
                             ", " + base.name() + " has " + device_list(base.lifetimes()));
  AnswerOutput out;
  const bool pass = regressions.empty();
  out.exit_code = pass ? 0 : 3;
  if (!only_new.empty() || !only_base.empty()) {
    std::string note = "allocscope check: devices not compared:";
    for (int64_t d : only_new) note += " cuda:" + std::to_string(d) + " (only in " + now.name() + ")";
    for (int64_t d : only_base) note += " cuda:" + std::to_string(d) + " (only in " + base.name() + ")";
    out.notes.push_back(note);
  }
  if (o.has("json")) {
    json j = {{"pass", pass},
              {"baseline", base.name()},
              {"new", now.name()},
              {"limits", {{"max_peak_growth", l.peak}, {"max_reserved_growth", l.reserved >= 0 ? json(l.reserved) : json()}}},
              {"devices", devices},
              {"regressions", regressions}};
    out.out = j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  } else {
    out.out = std::string(pass ? "PASS" : "FAIL") + ": " + printable(now.name()) + " against the baseline " +
              printable(base.name()) + "\n" + text;
    for (const json& r : regressions) out.out += "regression: " + printable(r.get<std::string>()) + "\n";
  }
  return out;
}

}  // namespace

const AnswerDef& check_answer_def() {
  static const AnswerDef d{{"check", {"json"}, {"max-peak-growth", "max-reserved-growth", "device", "top"}, 2, 2,
                            "usage: allocscope check BASELINE NEW [--max-peak-growth 5%] [--max-reserved-growth P] "
                            "[--device N] [--json]"},
                           [](const AnswerOptions& o) { return status_of(parse(o)); }, run};
  return d;
}

}  // namespace allocscope::answers
