// Plan (plan.h): every change predicted alone, then the smallest combinations of the ones that help, cheapest first.
#include "allocscope/plan.h"

#include <algorithm>
#include <optional>

#include "allocscope/oom.h"
#include "util/parallel.h"
#include "whatif/internal.h"

namespace allocscope {
namespace {

WhatIfChange change(const char* flag, const char* value, double world = 0) {
  return parse_change(flag, value, world).value();  // the candidates below are all valid flags
}

// The candidates, by what they cost the user: settings, then lines of code, then changes of how it trains. A run
// that does not train (no gradient, no optimizer state, no training step an OOM cut short) gets only the changes
// that mean something without a backward: the allocator, the precision, and (as for any run) a smaller batch.
std::vector<WhatIfChange> candidates(const Snapshot& s, const PlanOptions& o, bool trains) {
  std::vector<WhatIfChange> c;
  if (!s.expandable_segments()) c.push_back(change("allocator", "expandable_segments:True"));
  if (trains) {
    c.push_back(change("zero-grad", "none"));
    c.push_back(change("optimizer", "adamw-fused"));
  }
  c.push_back(change("precision", "bf16-autocast"));
  if (!trains) {
    c.push_back(change("precision", "bf16-weights"));
    return c;
  }
  c.push_back(change("checkpoint", "all"));
  for (const char* k : {"2", "4", "8"}) c.push_back(change("accumulate", k));
  c.push_back(change("optimizer", "sgd-momentum"));
  c.push_back(change("optimizer", "adafactor"));
  c.push_back(change("optimizer", "adam-8bit"));
  c.push_back(change("precision", "bf16-weights"));
  c.push_back(change("offload", "optimizer"));
  if (o.world_size >= 2) {
    const std::string w = std::to_string(static_cast<long long>(o.world_size));
    for (const char* z : {"zero1", "zero2", "zero3"}) c.push_back(change("shard", z, o.world_size));
  }
  return c;
}

// Two changes that cannot go together: two of one kind, or an optimizer with its state on the host.
bool conflict(const WhatIfChange& a, const WhatIfChange& b) {
  using K = WhatIfChange::Kind;
  auto state = [](const WhatIfChange& c) { return c.kind == K::kOptimizer || c.kind == K::kOffload || c.kind == K::kShard; };
  return a.kind == b.kind || (state(a) && state(b));
}

PlanOption predict(const Snapshot& s, const DeviceLifetimes& lt, const Categories& c,
                   const std::optional<GpuCapacity>& gpu, std::vector<WhatIfChange> changes, double batch,
                   bool* ok) {
  WhatIfOptions w;
  w.gpu = gpu;
  w.largest_batch = false;
  w.batch = batch;
  w.changes = changes;
  const WhatIfReport r = what_if(s, lt, c, w);
  PlanOption o;
  *ok = r.error.empty();
  if (!*ok) return o;
  o.changes = std::move(changes);
  o.batch = batch;
  o.cost = batch < 1.0 ? 4 : 0;
  for (const WhatIfChange& ch : o.changes) o.cost = std::max(o.cost, ch.cost());
  o.verdict = r.verdict;
  o.predicted_allocated = r.predicted_allocated;
  o.predicted_reserved = r.predicted_reserved;
  o.predicted_needed = r.predicted_needed;
  o.needed_low = r.needed_low;
  o.needed_high = r.needed_high;
  o.effects = r.effects;
  return o;
}

// One prediction plan() asks for: changes at a batch scale.
struct Ask {
  std::vector<WhatIfChange> changes;
  double batch = 1.0;
};

// Each ask predicted, on the process's cores: a plan on a 1M-event trace makes 20-35 predictions of 1-3 s each. At
// most 8 at once, since each holds its own model of the run (~250 MB at 1M events). Results in the order asked, so
// the plan is the same on any number of cores; nullopt where the model refused the changes.
std::vector<std::optional<PlanOption>> predict_each(const Snapshot& s, const DeviceLifetimes& lt, const Categories& c,
                                                    const std::optional<GpuCapacity>& gpu, const std::vector<Ask>& asks) {
  std::vector<std::optional<PlanOption>> out(asks.size());
  detail::parallel_for(
      asks.size(),
      [&](size_t i) {
        bool ok = false;
        PlanOption o = predict(s, lt, c, gpu, asks[i].changes, asks[i].batch, &ok);
        if (ok) out[i] = std::move(o);
      },
      8);
  return out;
}

}  // namespace

Plan plan(const Snapshot& s, const DeviceLifetimes& lt, const Categories& c, const PlanOptions& options) {
  Plan p;
  p.device = lt.device;
  p.gpu = options.gpu;
  // A file that ran out of memory: the GPU it ran out on, unless one is given.
  Lifetimes one;
  one.devices.push_back(lt);
  for (const OomReport& r : analyze_ooms(s, one))
    if (r.device == lt.device) {
      p.from_oom = true;
      if (!p.gpu && r.gpu.total_bytes) {
        p.gpu = r.gpu;
        p.notes.push_back("planned for the GPU it ran out of memory on: " + r.gpu.label +
                          (r.gpu.inferred ? " (inferred from the OOM; --gpu gives it)" : ""));
      }
      if (r.cause == OomCause::kAllocatorCap && !options.gpu)
        p.notes.push_back("it ran out under a per-process cap (set_per_process_memory_fraction): give --gpu the "
                          "capped size to plan for it");
      break;
    }
  WhatIfOptions base;
  base.gpu = p.gpu;
  base.largest_batch = false;
  p.recorded = what_if(s, lt, c, base);
  bool completed = false;
  for (const WhatIfEffect& e : p.recorded.effects)
    if (e.change == "(the first step, completed)") {
      completed = true;
      p.notes.push_back("the trace ends at an out-of-memory error in the first step, so what the rest of that step "
                        "needs is a guess and each option's range allows for it: the cheaper answer comes from a "
                        "snapshot of one whole step (run it with the first option, record, and plan again)");
    }
  // A trace that cannot say what the run holds (it starts mid-run, or holds no allocation): no verdict says "fits",
  // and the user is told why here, not only by `whatif`. One with no allocation at all has nothing to predict from.
  if (const std::string why = whatif_detail::incomplete_trace(lt); !why.empty()) {
    p.incomplete_trace = true;
    p.notes.push_back(why);
    if (std::none_of(lt.origin.begin(), lt.origin.end(), [](LifetimeOrigin o) { return o == LifetimeOrigin::kTraced; }))
      return p;
  }
  // A run that ran out of memory (on any device: the others' traces stop there too) may have been cut before its
  // first backward, so only a whole recording without gradients or optimizer state says the run does not train.
  const bool ran_out = std::find(s.events.action.begin(), s.events.action.end(), Action::kOom) != s.events.action.end();
  const bool trains = completed || ran_out || std::any_of(c.category.begin(), c.category.end(), [](Category k) {
                        return k == Category::kGradient || k == Category::kOptimizerState;
                      });
  if (!trains)
    p.notes.push_back("the trace holds no gradient and no optimizer state (inference, or a forward alone), so changes "
                      "of training (accumulation, checkpointing, the optimizer, zero_grad, offload, sharding) are not "
                      "tried: a smaller batch, or the input split into chunks run one after another, cuts what grows "
                      "with it");
  // On the GPU it ran out on, the recorded run does not fit: measured, whatever the model's range says.
  if (p.from_oom && p.gpu && !options.gpu && p.recorded.verdict != Verdict::kDoesNotFit) {
    p.recorded.verdict = Verdict::kDoesNotFit;
    p.recorded.fits = false;
  }
  const uint64_t recorded_need = p.recorded.predicted_needed;
  const uint64_t room = p.gpu ? allocator_room(*p.gpu) : 0;

  uint32_t next_rank = 0;
  auto finish = [&](PlanOption& o) {
    o.rank = next_rank++;
    o.margin = p.gpu ? (static_cast<double>(room) - static_cast<double>(o.needed_high)) / std::max<double>(1, room)
                     : 1.0 - static_cast<double>(o.predicted_needed) / std::max<double>(1, recorded_need);
  };
  // Each change alone; those that lower the least memory by at least 1% help.
  // A smaller batch too: the change of training a user makes last.
  std::vector<Ask> asks;
  for (const WhatIfChange& ch : candidates(s, options, trains)) asks.push_back({{ch}, 1.0});
  for (double b : {0.5, 0.25}) asks.push_back({{}, b});
  std::vector<PlanOption> singles;
  std::vector<std::optional<PlanOption>> predicted = predict_each(s, lt, c, p.gpu, asks);
  p.tried += static_cast<uint32_t>(asks.size());
  for (std::optional<PlanOption>& o : predicted) {
    // A smaller batch too: a trace where nothing grows with the batch gains nothing from one.
    if (!o || o->predicted_needed * 100 > recorded_need * 99) continue;
    finish(*o);
    singles.push_back(std::move(*o));
  }
  auto order = [&](const PlanOption& a, const PlanOption& b) {
    if (p.gpu && (a.verdict == Verdict::kFits) != (b.verdict == Verdict::kFits)) return a.verdict == Verdict::kFits;
    if (a.cost != b.cost) return a.cost < b.cost;
    if (a.changes.size() != b.changes.size()) return a.changes.size() < b.changes.size();
    return a.rank < b.rank;
  };
  std::vector<PlanOption> all = singles;
  const auto fitting = [&](const std::vector<PlanOption>& v) {
    return std::count_if(v.begin(), v.end(), [](const PlanOption& o) { return o.verdict == Verdict::kFits; });
  };
  // Combinations of the changes that help (not the smaller batch, which is the last resort): pairs when fewer than
  // three single changes fit (or, without a GPU, to show what two together cut), then triples when none fits yet.
  std::vector<const PlanOption*> helpful;
  for (const PlanOption& o : singles)
    if (!o.changes.empty()) helpful.push_back(&o);
  std::stable_sort(helpful.begin(), helpful.end(),
                   [](const PlanOption* a, const PlanOption* b) { return a->predicted_needed < b->predicted_needed; });
  if (helpful.size() > 6) helpful.resize(6);  // the six that cut most: 15 pairs, 20 triples at most
  auto try_all = [&](const std::vector<Ask>& combos) {
    std::vector<std::optional<PlanOption>> got = predict_each(s, lt, c, p.gpu, combos);
    p.tried += static_cast<uint32_t>(combos.size());
    for (std::optional<PlanOption>& o : got) {
      if (!o) continue;
      finish(*o);
      all.push_back(std::move(*o));
    }
  };
  if (!p.gpu || fitting(all) < 3) {
    std::vector<Ask> pairs;
    for (size_t i = 0; i < helpful.size(); ++i)
      for (size_t j = i + 1; j < helpful.size(); ++j)
        if (!conflict(helpful[i]->changes[0], helpful[j]->changes[0]))
          pairs.push_back({{helpful[i]->changes[0], helpful[j]->changes[0]}, 1.0});
    try_all(pairs);
  }
  if (p.gpu && fitting(all) == 0) {
    std::vector<Ask> triples;
    for (size_t i = 0; i < helpful.size(); ++i)
      for (size_t j = i + 1; j < helpful.size(); ++j)
        for (size_t k = j + 1; k < helpful.size(); ++k) {
          const WhatIfChange &a = helpful[i]->changes[0], &b = helpful[j]->changes[0], &d = helpful[k]->changes[0];
          if (!conflict(a, b) && !conflict(a, d) && !conflict(b, d)) triples.push_back({{a, b, d}, 1.0});
        }
    try_all(triples);
  }
  std::stable_sort(all.begin(), all.end(), order);
  if (p.gpu && fitting(all) > 0) {
    // Only what fits, and a combination only where no cheaper option containing fewer changes already fits.
    std::vector<PlanOption> kept;
    for (PlanOption& o : all) {
      if (o.verdict != Verdict::kFits) continue;
      bool covered = false;
      for (const PlanOption& k : kept)
        covered = covered || (k.cost <= o.cost && std::all_of(k.changes.begin(), k.changes.end(), [&](const WhatIfChange& x) {
                                return std::any_of(o.changes.begin(), o.changes.end(),
                                                   [&](const WhatIfChange& y) { return x.flag() == y.flag(); });
                              }) && k.batch >= o.batch && !k.changes.empty());
      if (!covered) kept.push_back(std::move(o));
    }
    all = std::move(kept);
  } else if (p.gpu) {
    p.notes.push_back("nothing tried fits this GPU surely: the options closest to fitting are listed");
    std::stable_sort(all.begin(), all.end(),
                     [](const PlanOption& a, const PlanOption& b) { return a.needed_high < b.needed_high; });
  } else {
    std::stable_sort(all.begin(), all.end(), [](const PlanOption& a, const PlanOption& b) {
      return a.cost != b.cost ? a.cost < b.cost : a.predicted_needed < b.predicted_needed;
    });
  }
  if (all.size() > options.max_options) all.resize(options.max_options);
  p.options = std::move(all);
  return p;
}

}  // namespace allocscope
