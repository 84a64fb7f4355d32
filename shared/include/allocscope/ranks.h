// Comparing the ranks of one job: one row per rank's snapshot (or per `allocscope summary --json` of it), the ranks
// whose memory stands out by robust statistics, and what such a rank holds at its peak that the others do not.
//
// The rows are small (numbers and a few sites), so a thousand ranks are compared after each file was summarised and
// dropped: the CLI and the viewer load one snapshot per worker at a time.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "allocscope/result.h"
#include "allocscope/snapshot.h"
#include "allocscope/summary.h"

namespace allocscope {

enum class RankMeasure : uint8_t { kPeakAllocated, kPeakReserved, kFinalAllocated, kFinalReserved };
constexpr int kRankMeasures = 4;
std::string_view rank_measure_name(RankMeasure m);  // "peak_allocated", ...

struct RankSite {
  std::string site;  // FrameFilter::site_text of the site (the one rule for "which line")
  uint64_t bytes = 0;
  // In an outlier's holds_more / holds_less: a lower bound ("at least"), where a typical rank's list stops before
  // the site (its top sites do not add up to its peak), so what it holds there is known only to be below its
  // smallest listed site.
  bool at_least = false;
};

struct RankRow {
  std::string name;    // the file as given
  int64_t rank = -1;   // from the name (rank3, rank_3, RANK-3, r3 ...), else -1
  uint32_t index = 0;  // its position among the inputs (compare_ranks sets it)
  std::string error;   // why the file could not be read; the row then has no numbers
  int64_t device = 0;  // the rank's busiest device (most trace events, then most reserved)
  uint64_t events = 0;  // 0: no trace, so its peaks are only the state the snapshot holds (not compared)
  std::array<uint64_t, kRankMeasures> bytes{};  // by RankMeasure
  uint32_t ooms = 0;
  bool leak_suspected = false;
  std::vector<RankSite> sites;  // alive at the allocated peak, largest first (the summary's top sites)
};

// The row of one loaded snapshot, from its summary (summarize() with `top_sites` sites kept).
RankRow rank_row(const Snapshot& s, const Summary& sum, std::string name);
// The row of a file written by `allocscope summary --json` (the reduce step for fleets summarised where they ran).
// Errors name what is missing; unknown keys are ignored.
Result<RankRow> rank_row_from_summary_json(std::string_view json, std::string name);
// The rank a file's name gives, or -1: the last "rank" followed by digits (any case, '_' '-' '.' or nothing
// between), else an "r" followed by digits as a whole word of a name with no other digits ("trace_r3.pickle"; not
// "resnet_r50_gpu0"), else -1.
int64_t rank_from_name(std::string_view path);

struct RanksOptions {
  double z = 3.5;          // modified z-score (Iglewicz and Hoaglin: 0.6745 |x - median| / MAD) above which a rank
                           // is an outlier on a measure ...
  double min_share = 0.05; // ... and only when it is also this share of the median away: ranks of one job differ
                           // by a few percent, and equal ranks (MAD 0) must not flag noise
  uint32_t top_sites = 5;  // sites listed per outlier
};

// Why an outlier differs where its sites at the peak cannot say (it stands out at the end or by reserved bytes
// only): the decision the CLI and the viewer each put in words. The sign matters: a rank reserving less than the
// others does not cache more (an audit found both explained alike).
enum class RankWhy : uint8_t {
  kSites,         // an outlier on its allocated peak: holds_more / holds_less say where
  kKeepsMore,     // its final allocated bytes are above the others' (after its peak, or at the end without a trace)
  kKeepsLess,     // below them
  kCachesMore,    // allocated typical, reserved above: what its caching allocator keeps cached
  kReservesLess,  // allocated typical, reserved below: the others cache more than it does
};
std::string_view rank_why_name(RankWhy w);  // "sites", "keeps_more", "keeps_less", "caches_more", "reserves_less"

struct RankVerdict {
  bool outlier = false;
  RankWhy why = RankWhy::kSites;  // for an outlier
  std::array<bool, kRankMeasures> outlier_on{};
  // Modified z-score per measure; infinite when MAD is 0 (most ranks equal) and the value differs from the median
  // (JSON: null).
  std::array<double, kRankMeasures> z{};
  double score = 0;                        // the largest z over the measures it is an outlier on
  // What it holds at its peak above the median of the typical ranks' bytes at the same site (the ranks that are not
  // outliers; all the other ranks when every rank is one; a site is its text), largest first.
  std::vector<RankSite> holds_more;
  // The sites the others hold (median) that it holds less of: for a rank that stands out by using less.
  std::vector<RankSite> holds_less;
  // Both lists explain its allocated peak only: they are filled when it is an outlier there, with the sites whose
  // difference is at least a tenth of its distance to the median (a rank's usual spread is not the cause). When it
  // stands out at the end or by reserved bytes only, they stay empty and this names a typical rank to diff against
  // (the one whose final allocated bytes are nearest the median), or "" when there is none.
  std::string compare_with;
};

struct RanksReport {
  RanksOptions options;   // the rule the verdicts used
  // Rows in the order to show: outliers first (highest score first), then by rank (then name); unreadable last.
  std::vector<RankRow> rows;
  std::vector<RankVerdict> verdicts;  // parallel to rows
  std::array<double, kRankMeasures> median{}, mad{};
  // Ranks that more than one readable file claims (by name or by the summary's "file"), with those files in input
  // order: one job's rank twice, or two jobs in one folder. Their rows are all compared; the reader is told.
  struct SameRank {
    int64_t rank = -1;
    std::vector<std::string> files;
  };
  std::vector<SameRank> same_rank;
  uint32_t readable = 0;  // rows with numbers
  uint32_t outliers = 0;
  bool enough = false;    // at least 3 readable rows: fewer cannot tell which one is odd
  // Per measure, whether it was compared: 3 ranks or more have it (the peaks need a trace: with fewer traced
  // ranks, "no outlier" says nothing of them).
  std::array<bool, kRankMeasures> compared{};
};

RanksReport compare_ranks(std::vector<RankRow> rows, const RanksOptions& options = {});

std::string to_json(const RanksReport& r);
std::string to_text(const RanksReport& r, size_t max_rows = 20);

// The device one snapshot's answers are about when it is one rank of a job: the one with the most trace events,
// then the most reserved bytes (a DDP rank's snapshot lists every device but traces only its own); -1 when no
// device has a trace. The rule `ranks` uses, and the viewer's Diff view.
int64_t busiest_traced_device(const Snapshot& s);

}  // namespace allocscope
