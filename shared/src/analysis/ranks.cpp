// Ranks: rows from summaries, outliers by the median and the median absolute deviation, and the sites an outlier
// holds that the others do not.
#include "allocscope/ranks.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "allocscope/frame_filter.h"

namespace allocscope {

std::string_view rank_why_name(RankWhy w) {
  switch (w) {
    case RankWhy::kKeepsMore: return "keeps_more";
    case RankWhy::kKeepsLess: return "keeps_less";
    case RankWhy::kCachesMore: return "caches_more";
    case RankWhy::kReservesLess: return "reserves_less";
    default: return "sites";
  }
}

std::string_view rank_measure_name(RankMeasure m) {
  switch (m) {
    case RankMeasure::kPeakAllocated: return "peak_allocated";
    case RankMeasure::kPeakReserved: return "peak_reserved";
    case RankMeasure::kFinalAllocated: return "final_allocated";
    case RankMeasure::kFinalReserved: return "final_reserved";
  }
  return "?";
}

namespace {

// A rank's memory is on the device it used: a DDP rank's snapshot lists every device but traces only its own.
template <typename Device, typename Events, typename Reserved>
const Device* busiest(const std::vector<Device>& devices, Events events, Reserved reserved) {
  const Device* best = nullptr;
  for (const Device& d : devices)
    if (!best || events(d) > events(*best) || (events(d) == events(*best) && reserved(d) > reserved(*best)))
      best = &d;
  return best;
}

struct DeviceLoad {
  int64_t device;
  uint64_t events, reserved;
};

}  // namespace

int64_t busiest_traced_device(const Snapshot& s) {
  std::vector<DeviceLoad> loads;
  for (const DeviceTrace& t : s.devices) {
    uint64_t reserved = 0;
    for (const Segment& seg : s.segments)
      if (seg.device == t.device) reserved += seg.total_size;
    loads.push_back({t.device, t.count(), reserved});
  }
  const DeviceLoad* best = busiest(loads, [](const DeviceLoad& d) { return d.events; },
                                   [](const DeviceLoad& d) { return d.reserved; });
  return best && best->events > 0 ? best->device : -1;
}

namespace {

bool word_boundary(std::string_view s, size_t i) { return i >= s.size() || !std::isalnum(static_cast<unsigned char>(s[i])); }

double median_of(std::vector<double>& v) {
  if (v.empty()) return 0;
  const size_t n = v.size();
  std::nth_element(v.begin(), v.begin() + n / 2, v.end());
  const double hi = v[n / 2];
  if (n % 2) return hi;
  return (*std::max_element(v.begin(), v.begin() + n / 2) + hi) / 2;
}

}  // namespace

int64_t rank_from_name(std::string_view path) {
  const size_t slash = path.find_last_of('/');
  std::string lower(path.substr(slash == std::string_view::npos ? 0 : slash + 1));
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto digits_at = [&](size_t i, int64_t* out) {
    size_t j = i;
    int64_t v = 0;
    while (j < lower.size() && std::isdigit(static_cast<unsigned char>(lower[j])) && j - i < 9) v = v * 10 + (lower[j++] - '0');
    if (j == i || (j < lower.size() && std::isdigit(static_cast<unsigned char>(lower[j])))) return false;
    *out = v;
    return true;
  };
  int64_t found = -1;
  for (size_t p = lower.find("rank"); p != std::string::npos; p = lower.find("rank", p + 1)) {
    size_t i = p + 4;
    if (i < lower.size() && (lower[i] == '_' || lower[i] == '-' || lower[i] == '.')) ++i;
    int64_t v;
    if (digits_at(i, &v)) found = v;
  }
  if (found >= 0) return found;
  // "r3" as a word of its own in a name with no other number: "trace_r3.pickle". An audit found "resnet_r50_gpu0"
  // read as rank 50 and "job_p100" as rank 100 ("p" was also our own pid's letter, %p), so both are refused.
  int words = 0;
  for (size_t i = 0; i < lower.size(); ++i) {
    if (lower[i] == 'r' && (i == 0 || !std::isalnum(static_cast<unsigned char>(lower[i - 1])))) {
      int64_t v;
      size_t j = i + 1;
      while (j < lower.size() && std::isdigit(static_cast<unsigned char>(lower[j]))) ++j;
      if (digits_at(i + 1, &v) && word_boundary(lower, j)) found = v, ++words;
    }
  }
  size_t digit_runs = 0;
  for (size_t i = 0; i < lower.size(); ++i)
    digit_runs += std::isdigit(static_cast<unsigned char>(lower[i])) && (i == 0 || !std::isdigit(static_cast<unsigned char>(lower[i - 1])));
  return words == 1 && digit_runs == 1 ? found : -1;
}

RankRow rank_row(const Snapshot& s, const Summary& sum, std::string name) {
  RankRow row;
  row.rank = rank_from_name(name);
  row.name = std::move(name);
  const DeviceSummary* d = busiest(
      sum.devices, [](const DeviceSummary& x) { return x.events; },
      [](const DeviceSummary& x) { return x.final_reserved; });
  if (!d) return row;  // an empty snapshot: zeros, which is what the rank held
  row.device = d->device;
  row.events = d->events;
  row.bytes = {d->peak_allocated, d->peak_reserved, d->final_allocated, d->final_reserved};
  row.ooms = d->ooms;
  row.leak_suspected = d->leak_suspected;
  for (size_t k = 0; k < d->top_site.size(); ++k)
    row.sites.push_back({FrameFilter::site_text(s, d->top_site[k]), d->top_site_bytes[k]});
  return row;
}

Result<RankRow> rank_row_from_summary_json(std::string_view text, std::string name) {
  using Json = nlohmann::json;
  const Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error{"not JSON (expected the output of `allocscope summary --json`)"};
  // A saved ranks report is not one rank's summary: said as such, not as an unreadable file (an audit).
  if (j.is_object() && j.contains("kind") && j["kind"] == "allocscope.ranks")
    return Error{"a ranks report (`allocscope ranks --json`), not one rank's summary: open it with `allocscope view`, "
                 "or give the ranks' snapshots or `allocscope summary --json` files"};
  if (!j.is_object() || !j.contains("devices") || !j["devices"].is_array())
    return Error{"no \"devices\" list (expected the output of `allocscope summary --json`)"};
  // Other tools' JSON can have a "devices" list too (a folder of rank files may hold a job's own reports): a summary
  // says how many events it read, and each of its devices has a peak and an end.
  if (!j.contains("events"))
    return Error{"no \"events\" count (expected the output of `allocscope summary --json`)"};
  for (const Json& d : j["devices"])
    if (!d.is_object() || !d.contains("peak_allocated") || !d.contains("final"))
      return Error{"a device without \"peak_allocated\" and \"final\" (expected the output of `allocscope summary --json`)"};
  auto u64 = [](const Json& o, std::initializer_list<const char*> path) -> uint64_t {
    const Json* p = &o;
    for (const char* k : path) {
      if (!p->is_object()) return 0;
      auto it = p->find(k);
      if (it == p->end()) return 0;
      p = &*it;
    }
    return p->is_number_unsigned() ? p->get<uint64_t>()
           : p->is_number_integer() ? static_cast<uint64_t>(std::max<int64_t>(0, p->get<int64_t>()))
                                    : 0;
  };
  std::vector<const Json*> devices;
  for (const Json& d : j["devices"])
    if (d.is_object()) devices.push_back(&d);
  RankRow row;
  row.rank = rank_from_name(name);
  if (row.rank < 0 && j.contains("file") && j["file"].is_string()) {
    // The JSON file's own name first (whoever saved rank2.json chose it; the snapshot inside may carry a node-local
    // rank), else the snapshot's that the summary names.
    row.rank = rank_from_name(j["file"].get<std::string>());
  }
  row.name = std::move(name);
  const Json* const* d = busiest(
      devices, [&](const Json* x) { return u64(*x, {"events"}); }, [&](const Json* x) { return u64(*x, {"final", "reserved"}); });
  if (!d) return row;
  const Json& dev = **d;
  row.device = dev.contains("device") && dev["device"].is_number_integer() ? dev["device"].get<int64_t>() : 0;
  row.events = u64(dev, {"events"});
  row.bytes = {u64(dev, {"peak_allocated", "bytes"}), u64(dev, {"peak_reserved", "bytes"}), u64(dev, {"final", "allocated"}),
               u64(dev, {"final", "reserved"})};
  row.ooms = static_cast<uint32_t>(std::min<uint64_t>(u64(dev, {"ooms"}), UINT32_MAX));
  row.leak_suspected = dev.contains("leak_suspected") && dev["leak_suspected"].is_boolean() && dev["leak_suspected"].get<bool>();
  if (dev.contains("top_sites") && dev["top_sites"].is_array()) {
    for (const Json& t : dev["top_sites"]) {
      if (!t.is_object()) continue;
      std::string site = "<no frames>";
      if (auto it = t.find("site"); it != t.end() && it->is_object() && it->contains("text") && (*it)["text"].is_string())
        site = printable((*it)["text"].get<std::string>());  // as site_text writes it: a crafted file's too
      row.sites.push_back({std::move(site), u64(t, {"bytes"})});
    }
  }
  return row;
}

RanksReport compare_ranks(std::vector<RankRow> rows, const RanksOptions& o) {
  RanksReport r;
  r.options = o;
  const size_t n = rows.size();
  std::vector<size_t> good;
  for (size_t i = 0; i < n; ++i)
    if (rows[i].error.empty()) good.push_back(i);
  r.readable = static_cast<uint32_t>(good.size());
  r.enough = good.size() >= 3;
  std::map<int64_t, std::vector<std::string>> by_rank;
  for (size_t i : good)
    if (rows[i].rank >= 0) by_rank[rows[i].rank].push_back(rows[i].name);
  for (auto& [rank, files] : by_rank)
    if (files.size() > 1) r.same_rank.push_back({rank, std::move(files)});
  std::vector<RankVerdict> v(n);
  for (size_t i = 0; i < n; ++i) rows[i].index = static_cast<uint32_t>(i);
  for (int k = 0; k < kRankMeasures; ++k) {
    // A rank without a trace has no peak, only its state at the end: its peaks are left out of the comparison (an
    // audit: it read as using 30% less at its peak).
    const bool peak = k == static_cast<int>(RankMeasure::kPeakAllocated) || k == static_cast<int>(RankMeasure::kPeakReserved);
    std::vector<size_t> compared;
    for (size_t i : good)
      if (!peak || rows[i].events > 0) compared.push_back(i);
    std::vector<double> x;
    x.reserve(compared.size());
    for (size_t i : compared) x.push_back(static_cast<double>(rows[i].bytes[k]));
    const double m = median_of(x);
    for (double& e : x) e = std::fabs(e - m);
    const double mad = median_of(x);
    r.median[k] = m;
    r.mad[k] = mad;
    const bool enough = compared.size() >= 3;
    r.compared[k] = enough;
    for (size_t i : compared) {
      const double d = std::fabs(static_cast<double>(rows[i].bytes[k]) - m);
      const double z = mad > 0 ? 0.6745 * d / mad : (d > 0 ? std::numeric_limits<double>::infinity() : 0);
      v[i].z[k] = z;
      if (enough && z > o.z && d > o.min_share * std::max(1.0, m)) {
        v[i].outlier_on[k] = true;
        v[i].outlier = true;
        v[i].score = std::max(v[i].score, z);
      }
    }
  }
  // Sites are compared by their text (the one rule for "which line"): two ranks, or two files of one rank, may name
  // the same line by different paths (a job's code under each node's own folder), and a list with one text twice
  // would be compared twice against a median that mixed them.
  for (size_t i : good) {
    std::vector<RankSite> merged;
    std::unordered_map<std::string, size_t> at;
    for (RankSite& s : rows[i].sites) {
      auto [it, fresh] = at.emplace(s.site, merged.size());
      if (fresh) merged.push_back(std::move(s));
      else merged[it->second].bytes += s.bytes;
    }
    std::stable_sort(merged.begin(), merged.end(), [](const RankSite& a, const RankSite& b) { return a.bytes > b.bytes; });
    rows[i].sites = std::move(merged);
  }
  // What the typical rank holds at each site: the median over the ranks that are not outliers, a rank without the
  // site counting as 0 bytes there; where every rank is an outlier on some measure, the median over all the others.
  std::vector<size_t> typical;
  for (size_t i : good)
    if (!v[i].outlier) typical.push_back(i);
  // A rank that does not list a site holds none there when its list is whole (its sites add up to its peak); else
  // anything up to its smallest listed site. The typical bytes at a site are a range: such ranks taken as 0 (low)
  // and as that bound (high). What an outlier holds more is measured against the high end, what it holds less
  // against the low one, so neither is overstated (an audit: +22 MiB printed where the truth was +20, a typical
  // rank's 2 MiB there being under its top 20 sites).
  std::vector<uint8_t> whole_list(rows.size(), 1);
  std::vector<double> smallest_site(rows.size(), 0);
  for (size_t i : good) {
    uint64_t sum = 0, smallest = UINT64_MAX;
    for (const RankSite& s : rows[i].sites) sum += s.bytes, smallest = std::min(smallest, s.bytes);
    whole_list[i] = sum >= rows[i].bytes[static_cast<int>(RankMeasure::kPeakAllocated)];
    smallest_site[i] = smallest == UINT64_MAX ? 0 : static_cast<double>(smallest);
  }
  struct Typical {
    double low = 0, high = 0;
  };
  struct TypicalSites {
    std::unordered_map<std::string, Typical> listed;  // the sites some of the ranks list
    Typical unlisted;                                 // a site none of them lists
    Typical at(const std::string& site) const {
      auto it = listed.find(site);
      return it == listed.end() ? unlisted : it->second;
    }
  };
  auto medians_over = [&](const std::vector<size_t>& ranks) {
    std::unordered_map<std::string, std::vector<std::pair<size_t, double>>> at_site;  // (rank, bytes) listing it
    for (size_t i : ranks)
      for (const RankSite& s : rows[i].sites) at_site[s.site].emplace_back(i, static_cast<double>(s.bytes));
    TypicalSites out;
    {
      std::vector<double> bound;
      for (size_t i : ranks) bound.push_back(whole_list[i] ? 0 : smallest_site[i]);
      out.unlisted.high = bound.empty() ? 0 : median_of(bound);
    }
    std::vector<uint8_t> listed(rows.size(), 0);
    std::vector<double> low, high;
    for (const auto& [site, held] : at_site) {
      low.clear(), high.clear();
      for (const auto& [i, b] : held) listed[i] = 1, low.push_back(b), high.push_back(b);
      for (size_t i : ranks)
        if (!listed[i]) low.push_back(0), high.push_back(whole_list[i] ? 0 : smallest_site[i]);
      for (const auto& [i, b] : held) listed[i] = 0;
      out.listed[site] = Typical{median_of(low), median_of(high)};
    }
    return out;
  };
  const TypicalSites typical_bytes_all = medians_over(typical);
  // The typical rank to diff an outlier against at the end: final allocated bytes nearest the median.
  std::string nearest_typical;
  {
    double best = std::numeric_limits<double>::infinity();
    const int fa = static_cast<int>(RankMeasure::kFinalAllocated);
    for (size_t j : typical) {
      const double d = std::fabs(static_cast<double>(rows[j].bytes[fa]) - r.median[fa]);
      if (d < best) best = d, nearest_typical = rows[j].name;
    }
  }
  const int pa = static_cast<int>(RankMeasure::kPeakAllocated);
  for (size_t i : good) {
    if (!v[i].outlier) continue;
    ++r.outliers;
    if (!v[i].outlier_on[pa]) {
      // Its sites at the peak cannot explain a difference at the end or in reserved bytes.
      v[i].compare_with = nearest_typical;
      auto above = [&](RankMeasure m) {
        return static_cast<double>(rows[i].bytes[static_cast<int>(m)]) > r.median[static_cast<int>(m)];
      };
      if (v[i].outlier_on[static_cast<int>(RankMeasure::kFinalAllocated)]) {
        v[i].why = above(RankMeasure::kFinalAllocated) ? RankWhy::kKeepsMore : RankWhy::kKeepsLess;
      } else {
        const RankMeasure reserved = v[i].outlier_on[static_cast<int>(RankMeasure::kPeakReserved)]
                                         ? RankMeasure::kPeakReserved
                                         : RankMeasure::kFinalReserved;
        v[i].why = above(reserved) ? RankWhy::kCachesMore : RankWhy::kReservesLess;
      }
      continue;
    }
    // Differences smaller than a tenth of its distance to the median are the ranks' usual spread, not the cause.
    const double floor_bytes = 0.1 * std::fabs(static_cast<double>(rows[i].bytes[pa]) - r.median[pa]);
    TypicalSites others_bytes;
    if (typical.empty()) {
      std::vector<size_t> others;
      for (size_t j : good)
        if (j != i) others.push_back(j);
      others_bytes = medians_over(others);
    }
    const auto& typical_bytes = typical.empty() ? others_bytes : typical_bytes_all;
    uint64_t smallest_listed = UINT64_MAX, listed_bytes = 0;
    for (const RankSite& s : rows[i].sites) {
      smallest_listed = std::min(smallest_listed, s.bytes);
      listed_bytes += s.bytes;
      const Typical t = typical_bytes.at(s.site);
      const double b = static_cast<double>(s.bytes);
      if (b > t.high)
        v[i].holds_more.push_back({s.site, static_cast<uint64_t>(b - t.high), t.high != t.low});
      else if (b < t.low)
        v[i].holds_less.push_back({s.site, static_cast<uint64_t>(t.low - b), false});
    }
    // A typical site this rank does not list: it holds none there when its list is whole (its sites add up to its
    // peak), or else when the site would have made its list.
    const bool whole = listed_bytes >= rows[i].bytes[static_cast<int>(RankMeasure::kPeakAllocated)];
    for (const auto& typical_site : typical_bytes.listed) {
      const std::string& site = typical_site.first;  // not a structured binding: clang 14 cannot capture those
      const double t = typical_site.second.low;
      if (t <= 0 || (!whole && t <= static_cast<double>(smallest_listed == UINT64_MAX ? 0 : smallest_listed))) continue;
      const bool listed = std::any_of(rows[i].sites.begin(), rows[i].sites.end(), [&](const RankSite& s) { return s.site == site; });
      if (!listed) v[i].holds_less.push_back({site, static_cast<uint64_t>(t), false});
    }
    for (auto* list : {&v[i].holds_more, &v[i].holds_less}) {
      std::erase_if(*list, [&](const RankSite& s) { return static_cast<double>(s.bytes) < floor_bytes; });
      std::sort(list->begin(), list->end(),
                [](const RankSite& a, const RankSite& b) { return a.bytes != b.bytes ? a.bytes > b.bytes : a.site < b.site; });
      if (list->size() > o.top_sites) list->resize(o.top_sites);
    }
  }
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const bool ea = !rows[a].error.empty(), eb = !rows[b].error.empty();
    if (ea != eb) return eb;
    if (v[a].outlier != v[b].outlier) return v[a].outlier;
    if (v[a].outlier && v[a].score != v[b].score) return v[a].score > v[b].score;
    const int64_t ra = rows[a].rank < 0 ? INT64_MAX : rows[a].rank, rb = rows[b].rank < 0 ? INT64_MAX : rows[b].rank;
    if (ra != rb) return ra < rb;
    return rows[a].name < rows[b].name;
  });
  for (size_t i : order) {
    r.rows.push_back(std::move(rows[i]));
    r.verdicts.push_back(std::move(v[i]));
  }
  return r;
}

}  // namespace allocscope
