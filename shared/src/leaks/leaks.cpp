// Leak detection: alive counts per allocation site at each iteration boundary; a site whose count keeps rising is a
// leak, gradients alive across several boundaries are memory held.
#include "allocscope/leaks.h"

#include <algorithm>
#include <map>
#include <memory>
#include <unordered_map>

#include "allocscope/owners.h"
#include "allocscope/timeline.h"

namespace allocscope {

namespace {

// Range [first, last) of boundaries that fall inside [birth, death).
void boundary_range(const RegionIndex& index, uint32_t birth, uint32_t death, uint32_t* first, uint32_t* last) {
  *first = index.before(birth);
  *last = index.before(death);
}

struct Acc {
  std::vector<int64_t> dcount;  // difference arrays over boundaries
  std::vector<int64_t> dbytes;
  uint32_t last_row = kNoRow;
  uint32_t category_votes[kCategoryCount] = {};
  uint32_t alive_at_end = 0;  // of its allocations alive at some boundary, those never freed in the trace
};

void finish(const Acc& a, uint32_t m, LeakGroup* g) {
  g->alive_count.resize(m);
  g->alive_bytes.resize(m);
  int64_t c = 0, b = 0;
  for (uint32_t j = 0; j < m; ++j) {
    c += a.dcount[j];
    b += a.dbytes[j];
    g->alive_count[j] = static_cast<uint32_t>(c);
    g->alive_bytes[j] = static_cast<uint64_t>(b);
  }
  int best = kCategoryCount - 1;
  for (int k = 0; k < kCategoryCount; ++k)
    if (a.category_votes[k] > a.category_votes[best]) best = k;
  g->category = static_cast<Category>(best);
}

// A leak keeps adding until the trace ends, and (almost) never gives back. What stays is the floor (the lower
// envelope: at each boundary, the lowest count from there on): a list cleared every 10 steps climbs at 9 of 10
// transitions but its floor stays put, while a leak beside a transient batch keeps a rising floor. The floor must
// rise at least twice and at a quarter of the transitions: a leak that keeps one tensor every third step (logging
// every N steps) rises at a third of them, and was missed when half were required. It must still be rising at the
// end: flat for no longer than its longest gap between rises, so warm-up that fills a cache and then stays level
// (1 2 3 4 5 6 6 6 6 6) is not a leak. With guessed iterations it also never gives back in one step as much as
// half of what it gained overall: a site whose count climbs and then drops back is cycling with a longer period
// than the iterations found, as a federated client's rounds do. (Over real optimizer steps a transient batch may
// come and go beside a leak, so there a drop does not clear it.)
template <class T>
bool rising(const std::vector<T>& alive, bool guessed) {
  const uint32_t m = static_cast<uint32_t>(alive.size());
  if (m < 2 || alive[m - 1] <= alive[0]) return false;
  uint32_t up = 0, down = 0;
  T largest_drop = 0;
  for (uint32_t j = 1; j < m; ++j) {
    if (alive[j] > alive[j - 1]) ++up;
    if (alive[j] < alive[j - 1]) {
      ++down;
      largest_drop = std::max<T>(largest_drop, alive[j - 1] - alive[j]);
    }
  }
  const T gained = alive[m - 1] - alive[0];
  // The transitions j (from boundary j-1 to j) where the floor rises, from the last boundary back.
  std::vector<uint32_t> rises;
  T floor = alive[m - 1];
  for (uint32_t j = m - 1; j-- > 0;) {
    const T below = std::min(floor, alive[j]);
    if (below < floor) rises.push_back(j + 1);
    floor = below;
  }
  const uint32_t floor_up = static_cast<uint32_t>(rises.size());
  const uint32_t needed = std::max<uint32_t>(2, (m - 1 + 3) / 4);
  if (floor_up < needed) return false;
  std::reverse(rises.begin(), rises.end());
  uint32_t longest_gap = 1;
  for (size_t k = 1; k < rises.size(); ++k) longest_gap = std::max(longest_gap, rises[k] - rises[k - 1]);
  const uint32_t flat_at_end = (m - 1) - rises.back();
  return flat_at_end <= longest_gap && down * 4 <= up && (!guessed || largest_drop <= gained / 2);
}

bool is_growing(const LeakGroup& g, bool guessed) { return rising(g.alive_count, guessed); }

// A pool of a library (a capture's reservations) grows the way a caching allocator does at warm-up: its first third
// of boundaries is left out (a healthy CuPy or PyTorch pool fills over the first iterations, then stays level), and
// what is left must rise by the rule above, in bytes, past the warm-up's end.
bool pool_rising(const std::vector<uint64_t>& reserved, uint32_t warmup) {
  if (reserved.size() < warmup + 3) return false;
  const std::vector<uint64_t> after(reserved.begin() + warmup, reserved.end());
  return after.back() > after.front() && rising(after, /*guessed=*/true);
}

// Iterations found from a repeating stack may be a model's layers inside one forward pass, not training steps:
// activations saved for backward then "grow" at every layer and backward frees them all. So with guessed
// iterations a leak must hold at least half its growth until the trace ends. A forward pass that runs out of
// memory partway looks the same as a loop hoarding tensors until the failure, so an OOM does not excuse the check:
// the OOM report lists what was alive. Optimizer.step annotations are real steps, and a program may free its hoard
// after the loop (transformer_leak's list of losses), so they need no such check.
bool still_held(const LeakGroup& g, uint32_t alive_at_end) {
  const uint32_t m = static_cast<uint32_t>(g.alive_count.size());
  const uint32_t gained = g.alive_count[m - 1] - g.alive_count[0];
  return alive_at_end >= g.alive_count[0] + (gained + 1) / 2;
}

// Whether every allocation made between the first and the last boundary was made inside a module's forward, by
// its frames (forward_stacks: the evidence categories read, not the category a user rule or a size guess then
// gave the row). A frameless allocation (the autograd engine's), a backward or optimizer frame, or anything made
// outside the model (an input copied in the loop, a result taken from the output) says the repeats are a loop's
// iterations.
// The same question for the frames that build or move a model's weights (model_building_stacks): LeakReport::setup_only.
// 7 of the 44 OOM snapshots of tests/fixtures/plan_runs/oom_cut (a job cut in its first forward: its trace is mostly
// the model's .cuda()) read as 5-9 iterations and a LEAK of the weights, +2.9 MiB to +27 MiB an "iteration".
bool all_made_by(const DeviceLifetimes& lt, const Iterations& it, const std::vector<uint8_t>& stacks) {
  const uint32_t first = it.boundary.front(), last = it.boundary.back();
  bool any = false;
  for (uint32_t i = 0; i < lt.count(); ++i) {
    if (lt.alloc_event[i] == kNoEvent || lt.alloc_event[i] < first || lt.alloc_event[i] >= last) continue;
    if (lt.stack[i] >= stacks.size() || !stacks[lt.stack[i]]) return false;
    any = true;
  }
  return any;
}

}  // namespace

LeakReport find_leaks(const Snapshot& s, const DeviceLifetimes& lt, const Iterations& it, const Categories& c,
                      const FrameFilter& ff, const LeakOptions& options) {
  LeakReport r;
  r.device = lt.device;
  r.iterations = it;
  const uint32_t m = static_cast<uint32_t>(it.boundary.size());
  for (uint32_t b : it.boundary) r.total_at_boundary.push_back(lt.total[std::min(b, lt.steps() - 1)]);
  const uint32_t regions = it.regions();
  r.survivor_count.assign(regions, 0);
  r.survivor_bytes.assign(regions, 0);
  // Guessed iterations need more of them before a trend is believed.
  r.boundaries_needed = std::max(2u, it.source == Iterations::Source::kPeriodic
                                          ? std::max(options.min_boundaries, options.min_guessed_boundaries)
                                          : options.min_boundaries);  // a trend divides by boundaries - 1
  if (m == 0) return r;

  std::unique_ptr<OwnerMap> owners;  // captures only: each allocation there is a reservation its stack owns
  if (is_capture(s)) owners = std::make_unique<OwnerMap>(s);
  const RegionIndex index(it);
  std::unordered_map<FrameId, Acc> sites;        // every allocation, by site
  std::unordered_map<FrameId, Acc> held_grads;  // gradients alive at 2+ boundaries, by site
  struct PoolAcc {
    Acc total;
    std::unordered_map<FrameId, Acc> sites;
  };
  std::map<Owner, PoolAcc> pools;  // captures: what each library's pool reserves, judged as a pool
  for (uint32_t i = 0; i < lt.count(); ++i) {
    const uint32_t birth = lt.birth_step(i), death = lt.death_step(i);
    const uint32_t region = index.region_of(birth);
    // Never freed counts as outliving the next region even when that region runs to the trace's end (a death
    // step cannot pass the last step: the region before the last always read 0, ddp_rank1's hoard included).
    if (region + 1 < regions && (lt.free_event[i] == kNoEvent || death > it.region_end(region + 1))) {
      ++r.survivor_count[region];
      r.survivor_bytes[region] += lt.size[i];
    }
    uint32_t first, last;
    boundary_range(index, birth, death, &first, &last);
    if (first >= last) continue;  // alive at no boundary: cannot accumulate across iterations
    const FrameId site = ff.site(lt.stack[i]);
    auto add = [&](Acc& a) {
      if (a.dcount.empty()) {
        a.dcount.assign(m + 1, 0);
        a.dbytes.assign(m + 1, 0);
      }
      a.dcount[first] += 1;
      a.dcount[last] -= 1;
      a.dbytes[first] += static_cast<int64_t>(lt.size[i]);
      a.dbytes[last] -= static_cast<int64_t>(lt.size[i]);
      if (last == m) a.last_row = i;  // alive at the final boundary: the freshest example
      else if (a.last_row == kNoRow) a.last_row = i;
      ++a.category_votes[static_cast<int>(c.category[i])];
      a.alive_at_end += lt.free_event[i] == kNoEvent;
    };
    // In a capture, memory a library reserves and keeps (a caching allocator's pool growing at warm-up, NCCL's
    // buffers) is how that library works: reserved, not leaked, as one allocation. Only the program's own
    // allocations can leak there; a library's pool is judged as a whole, below.
    if (owners) {
      if (const Owner o = owners->owner(lt.stack[i]); is_library_owner(o)) {
        ++r.library_reservations_left_out;
        PoolAcc& p = pools[o];
        add(p.total);
        add(p.sites[site]);
        continue;
      }
    }
    add(sites[site]);
    // Held: alive at three boundaries or more (two when there are only two). A gradient zero_grad() never frees
    // lives from its first backward to the end; a healthy one lives across one step. Two optimizers of one class
    // (a GAN's two Adams) share the annotation's name, so there are two boundaries per loop and each model's
    // gradients, freed once per loop, span two of them: that is not held (tests/fixtures/leak_shapes/gan_same).
    // DDP's buckets are gradients meant to live as long as the model (ddp_rank0 read "held: zero_grad() missing").
    if (c.category[i] == Category::kGradient && c.reason[i] != CategoryReason::kDdpBucket &&
        last - first >= std::min<uint32_t>(3, m))
      add(held_grads[site]);
  }

  const bool guessed = it.source == Iterations::Source::kPeriodic;
  if (guessed && m >= 2) {
    r.forward_only = all_made_by(lt, it, forward_stacks(s));
    r.setup_only = !r.forward_only && all_made_by(lt, it, model_building_stacks(s));
  }
  if (m >= r.boundaries_needed) {
    for (auto& [site, a] : sites) {
      LeakGroup g;
      g.site = site;
      g.stack = a.last_row == kNoRow ? 0 : lt.stack[a.last_row];
      finish(a, m, &g);
      if (!is_growing(g, guessed)) continue;
      g.bytes_per_iteration = (g.alive_bytes[m - 1] > g.alive_bytes[0])
                                  ? (g.alive_bytes[m - 1] - g.alive_bytes[0]) / (m - 1)
                                  : 0;
      g.allocations = g.alive_count[m - 1] - g.alive_count[0];
      (guessed && !still_held(g, a.alive_at_end) ? r.released : r.growing).push_back(std::move(g));
    }
  }
  // A pool that keeps growing after warm-up is all a capture without PyTorch's tensors sees of a leak: said as
  // growth, with the sites its reservations grew at, never as "nothing grows" (an audit: a planted leak's capture read
  // "no leak" while its active bytes rose 222 MiB, 238 MiB ... 1.7 GiB).
  r.pools_judged = m >= r.boundaries_needed && m >= LeakReport::kPoolBoundaries;
  if (r.pools_judged) {
    const uint32_t warmup = std::max<uint32_t>(1, m / 3);
    for (auto& [owner, p] : pools) {
      if (owner != Owner::kPyTorch && owner != Owner::kCuPy && owner != Owner::kXla) continue;
      LeakGroup total;
      finish(p.total, m, &total);
      if (!pool_rising(total.alive_bytes, warmup)) continue;
      PoolGrowth g;
      g.owner = owner;
      g.warmup_boundaries = warmup;
      g.reserved_at_boundary = total.alive_bytes;
      g.bytes_per_iteration = (total.alive_bytes[m - 1] - total.alive_bytes[warmup]) / (m - 1 - warmup);
      for (auto& [site, a] : p.sites) {
        LeakGroup sg;
        sg.site = site;
        sg.stack = a.last_row == kNoRow ? 0 : lt.stack[a.last_row];
        finish(a, m, &sg);
        if (sg.alive_bytes[m - 1] <= sg.alive_bytes[warmup]) continue;
        sg.bytes_per_iteration = (sg.alive_bytes[m - 1] - sg.alive_bytes[warmup]) / (m - 1 - warmup);
        sg.allocations = sg.alive_count[m - 1] > sg.alive_count[warmup] ? sg.alive_count[m - 1] - sg.alive_count[warmup] : 0;
        g.sites.push_back(std::move(sg));
      }
      std::sort(g.sites.begin(), g.sites.end(), [](const LeakGroup& x, const LeakGroup& y) {
        return x.bytes_per_iteration != y.bytes_per_iteration ? x.bytes_per_iteration > y.bytes_per_iteration
                                                              : x.site < y.site;
      });
      r.pools_growing.push_back(std::move(g));
    }
    std::sort(r.pools_growing.begin(), r.pools_growing.end(), [](const PoolGrowth& x, const PoolGrowth& y) {
      return x.bytes_per_iteration != y.bytes_per_iteration ? x.bytes_per_iteration > y.bytes_per_iteration
                                                            : x.owner < y.owner;
    });
  }
  if (m >= 2) {
    for (auto& [site, a] : held_grads) {
      LeakGroup g;
      g.site = site;
      g.stack = a.last_row == kNoRow ? 0 : lt.stack[a.last_row];
      finish(a, m, &g);
      g.category = Category::kGradient;
      g.bytes_per_iteration = *std::max_element(g.alive_bytes.begin(), g.alive_bytes.end());
      g.allocations = *std::max_element(g.alive_count.begin(), g.alive_count.end());
      r.held.push_back(std::move(g));
    }
  }
  // Deterministic order: by size, then by site id (unordered_map order must not leak into the output).
  auto by_bytes = [](const LeakGroup& x, const LeakGroup& y) {
    if (x.bytes_per_iteration != y.bytes_per_iteration) return x.bytes_per_iteration > y.bytes_per_iteration;
    if (x.allocations != y.allocations) return x.allocations > y.allocations;
    return x.site < y.site;
  };
  std::sort(r.growing.begin(), r.growing.end(), by_bytes);
  std::sort(r.held.begin(), r.held.end(), by_bytes);
  std::sort(r.released.begin(), r.released.end(), by_bytes);
  return r;
}

}  // namespace allocscope
