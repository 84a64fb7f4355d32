// The ranks report as text (outliers with what they hold, then a table) and as JSON (every row, for scripts and the
// viewer's Ranks view).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "allocscope/frame_filter.h"
#include "allocscope/memviz.h"
#include "allocscope/ranks.h"
#include "json_common.h"

namespace allocscope {

namespace {

constexpr RankMeasure kAll[kRankMeasures] = {RankMeasure::kPeakAllocated, RankMeasure::kPeakReserved,
                                             RankMeasure::kFinalAllocated, RankMeasure::kFinalReserved};
constexpr const char* kLabel[kRankMeasures] = {"peak allocated", "peak reserved", "final allocated", "final reserved"};

std::string who(const RankRow& row) {
  return (row.rank >= 0 ? "rank " + std::to_string(row.rank) + " (" + printable(row.name) + ")" : printable(row.name));
}

std::string signed_size(double delta) {
  std::string out(1, delta < 0 ? '-' : '+');
  return out + memviz::format_size(static_cast<uint64_t>(std::fabs(delta)));
}

std::string pad(std::string s, size_t w, bool right) {
  if (s.size() >= w) return s;
  return right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
}

// "3.5 robust deviations (modified z-score) and 5%": an outlier is beyond both, a typical rank within either.
std::string rule(const RanksOptions& o, const char* joiner = "and") {
  char buf[128];
  std::snprintf(buf, sizeof buf, "%g robust deviations (modified z-score) %s %g%%", o.z, joiner, 100 * o.min_share);
  return buf;
}

}  // namespace

std::string to_text(const RanksReport& r, size_t max_rows) {
  std::string out = std::to_string(r.rows.size()) + " rank file(s)";
  if (r.readable != r.rows.size()) out += ", " + std::to_string(r.rows.size() - r.readable) + " unreadable";
  out += "\n";
  for (int k = 0; k < kRankMeasures; ++k)
    out += "  median " + std::string(kLabel[k]) + ": " + memviz::format_size(static_cast<uint64_t>(r.median[k])) +
           " (median absolute deviation " + memviz::format_size(static_cast<uint64_t>(r.mad[k])) + ")\n";
  for (const RanksReport::SameRank& same : r.same_rank) {
    out += "  rank " + std::to_string(same.rank) + " is in " + std::to_string(same.files.size()) + " files:";
    for (const std::string& f : same.files) out += " " + printable(f);
    out += " (each is compared as a rank of its own)\n";
  }
  if (!r.enough) {
    out += "Fewer than 3 readable ranks: telling which one is the outlier needs three or more (`allocscope diff A B` "
           "compares two).\n";
  } else if (!r.outliers) {
    const bool peaks = r.compared[static_cast<int>(RankMeasure::kPeakAllocated)];
    out += "No outlier: every rank is within " + rule(r.options, "or") + " of the median on " +
           (peaks ? "every measure" : "its final state") + ".\n";
    // An audit: with one of three ranks traced, "on every measure" was said of peaks never compared.
    if (!peaks)
      out += "Their peaks were not compared: fewer than 3 ranks have a trace (a snapshot without one holds only its "
             "final state).\n";
  } else {
    out += std::to_string(r.outliers) + " outlier(s) (farther than " + rule(r.options) + " from the median):\n";
    for (size_t i = 0; i < r.rows.size(); ++i) {
      const RankVerdict& v = r.verdicts[i];
      if (!v.outlier) continue;
      const RankRow& row = r.rows[i];
      out += "  " + who(row) + " cuda:" + std::to_string(row.device) + "\n";
      for (int k = 0; k < kRankMeasures; ++k) {
        if (!v.outlier_on[k]) continue;
        const double delta = static_cast<double>(row.bytes[k]) - r.median[k];
        char pct[48];
        if (r.median[k] > 0) std::snprintf(pct, sizeof pct, ", %+.0f%% against the median", 100.0 * delta / r.median[k]);
        else std::snprintf(pct, sizeof pct, " against a median of 0");  // no share of nothing
        out += "    " + std::string(kLabel[k]) + " " + memviz::format_size(row.bytes[k]) + " (" + signed_size(delta) +
               pct + ")\n";
      }
      for (const RankSite& s : v.holds_more)
        out += "    holds more at its peak: " + std::string(s.at_least ? "at least " : "") +
               signed_size(static_cast<double>(s.bytes)) + "  " + s.site + "\n";
      for (const RankSite& s : v.holds_less)
        out += "    holds less at its peak: " + signed_size(-static_cast<double>(s.bytes)) + "  " + s.site + "\n";
      const bool at_peak = v.outlier_on[static_cast<int>(RankMeasure::kPeakAllocated)];
      if (at_peak && v.holds_more.empty() && v.holds_less.empty())
        out += "    no site at its peak differs by a tenth of that: the difference is spread over many sites, or is "
               "in sites past its top ones (`allocscope peak` lists them all)\n";
      const std::string diff_hint =
          v.compare_with.empty() ? std::string(" (`allocscope diff` against a typical rank lists what)")
                                 : ": `allocscope diff " + printable(v.compare_with) + " " + printable(row.name) + "` lists what";
      const std::string peak_said = row.events == 0 ? "it has no trace, so its peaks were not compared"
                                                    : "its allocated peak is typical";
      const std::string when = row.events == 0 ? " at the end" : " after its peak";
      switch (v.why) {
        case RankWhy::kSites: break;
        case RankWhy::kKeepsMore: out += "    " + peak_said + ": it keeps more" + when + diff_hint + "\n"; break;
        case RankWhy::kKeepsLess: out += "    " + peak_said + ": it keeps less" + when + diff_hint + "\n"; break;
        case RankWhy::kCachesMore:
          out += "    its allocated memory is typical: the difference is reserved but not allocated, memory PyTorch's "
                 "caching allocator keeps cached (freed blocks, fragmentation; `allocscope state " + printable(row.name) +
                 "` shows its segments)\n";
          break;
        case RankWhy::kReservesLess:
          out += "    its allocated memory is typical: it reserves less than the others, whose caching allocators keep "
                 "more cached than it does (freed blocks, fragmentation; `allocscope state` on a typical rank shows "
                 "its segments)\n";
          break;
      }
    }
  }
  out += pad("rank", 6, true) + "  " + pad("device", 7, false);
  for (const char* l : kLabel) out += pad(l, 16, true);
  out += pad("events", 10, true) + "  file\n";
  size_t shown = 0;
  for (size_t i = 0; i < r.rows.size() && shown < max_rows; ++i, ++shown) {
    const RankRow& row = r.rows[i];
    out += pad(row.rank >= 0 ? std::to_string(row.rank) : "-", 6, true) + "  ";
    if (!row.error.empty()) {
      out += pad("-", 7, false) + "  unreadable: " + printable(row.error) + "  " + printable(row.name) + "\n";
      continue;
    }
    out += pad("cuda:" + std::to_string(row.device), 7, false);
    for (int k = 0; k < kRankMeasures; ++k) {
      const bool peak = k == static_cast<int>(RankMeasure::kPeakAllocated) || k == static_cast<int>(RankMeasure::kPeakReserved);
      out += pad(peak && row.events == 0 ? std::string("no trace")
                                         : std::string(r.verdicts[i].outlier_on[k] ? 1 : 0, '*') + memviz::format_size(row.bytes[k]),
                 16, true);
    }
    out += pad(std::to_string(row.events), 10, true) + "  " + printable(row.name);
    if (row.ooms) out += "  (" + std::to_string(row.ooms) + " OOM)";
    if (row.leak_suspected) out += "  (leak suspected)";
    out += "\n";
  }
  if (shown < r.rows.size())
    out += "... " + std::to_string(r.rows.size() - shown) + " more (--rows N shows more; --json has every row)\n";
  return out;
}

std::string to_json(const RanksReport& r) {
  using json_detail::Json;
  auto sites = [](const std::vector<RankSite>& v) {
    Json a = Json::array();
    for (const RankSite& s : v) {
      Json o = {{"site", s.site}, {"bytes", s.bytes}};
      if (s.at_least) o["at_least"] = true;  // a lower bound: RankSite::at_least
      a.push_back(std::move(o));
    }
    return a;
  };
  Json rows = Json::array();
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const RankRow& row = r.rows[i];
    const RankVerdict& v = r.verdicts[i];
    Json o{{"name", row.name}, {"index", row.index}, {"rank", row.rank}};
    if (!row.error.empty()) {
      o["error"] = row.error;
      rows.push_back(std::move(o));
      continue;
    }
    o["device"] = row.device;
    o["events"] = row.events;
    // A rank without a trace has no peak (null), only the state its snapshot holds.
    for (RankMeasure m : kAll) {
      const bool peak = m == RankMeasure::kPeakAllocated || m == RankMeasure::kPeakReserved;
      o[std::string(rank_measure_name(m))] = peak && row.events == 0 ? Json(nullptr) : Json(row.bytes[static_cast<int>(m)]);
    }
    o["ooms"] = row.ooms;
    o["leak_suspected"] = row.leak_suspected;
    o["outlier"] = v.outlier;
    Json z = Json::object();
    for (RankMeasure m : kAll) {
      const int k = static_cast<int>(m);
      o["outlier_" + std::string(rank_measure_name(m))] = v.outlier_on[k];
      z[std::string(rank_measure_name(m))] = std::isfinite(v.z[k]) ? Json(v.z[k]) : Json(nullptr);
    }
    o["z"] = std::move(z);
    o["top_site"] = row.sites.empty() ? "" : row.sites.front().site;
    o["sites"] = sites(row.sites);
    if (v.outlier) {
      o["holds_more"] = sites(v.holds_more);
      o["holds_less"] = sites(v.holds_less);
      if (!v.compare_with.empty()) o["compare_with"] = v.compare_with;
      o["why"] = rank_why_name(v.why);
    }
    rows.push_back(std::move(o));
  }
  Json compared = Json::object();
  for (RankMeasure m : kAll) compared[std::string(rank_measure_name(m))] = r.compared[static_cast<int>(m)];
  Json same_rank = Json::array();
  for (const RanksReport::SameRank& same : r.same_rank) same_rank.push_back({{"rank", same.rank}, {"files", same.files}});
  Json median = Json::object(), mad = Json::object();
  for (RankMeasure m : kAll) {
    median[std::string(rank_measure_name(m))] = r.median[static_cast<int>(m)];
    mad[std::string(rank_measure_name(m))] = r.mad[static_cast<int>(m)];
  }
  return json_detail::dump(Json{{"kind", "allocscope.ranks"},
                                {"files", r.rows.size()},
                                {"readable", r.readable},
                                {"enough", r.enough},
                                {"outliers", r.outliers},
                                {"rule", {{"z", r.options.z}, {"min_share", r.options.min_share},
                                          {"text", "an outlier is farther than " + rule(r.options) + " from the median"}}},
                                {"median", std::move(median)},
                                {"compared", std::move(compared)},
                                {"mad", std::move(mad)},
                                {"same_rank", std::move(same_rank)},
                                {"rows", std::move(rows)}});
}

}  // namespace allocscope
