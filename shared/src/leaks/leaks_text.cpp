// Human text for the leak report: the verdict first, then the growing sites, held gradients and per-iteration floor.
#include "allocscope/leaks.h"
#include "analysis/frame_filter_text.h"

namespace allocscope {

using namespace text_detail;

namespace {

std::string counts(const std::vector<uint32_t>& v) {
  std::string o;
  for (size_t k = 0; k < v.size(); ++k) {
    if (v.size() > 12 && k == 5) {
      o += " ...";
      k = v.size() - 6;
      continue;
    }
    o += (k ? " " : "") + std::to_string(v[k]);
  }
  return o;
}

}  // namespace

std::string to_text(const Snapshot& s, const LeakReport& r) {
  const FrameFilter ff(s);
  std::string o = "device " + std::to_string(r.device) + ": ";
  const uint32_t m = static_cast<uint32_t>(r.iterations.boundary.size());
  if (r.iterations.source == Iterations::Source::kNone) {
    return o + "no repeating iteration found (no optimizer annotations, no periodic allocations): cannot judge leaks\n";
  }
  if (r.forward_only) {
    o += "cannot judge leaks: all " + std::to_string(m) + " repeats of " + r.iterations.marker +
         " run inside module forwards (every allocation from the first to the last is made in one): they may be "
         "steps of one forward pass, whose activations its backward frees, or a loop that only calls the model\n";
  } else if (r.setup_only) {
    o += "cannot judge leaks: all " + std::to_string(m) + " repeats of " + r.iterations.marker +
         " build or move the model's weights (every allocation from the first to the last is a parameter or buffer "
         "a module makes in its __init__, .cuda(), .to() or load_state_dict): they are its layers, not a loop's "
         "iterations\n";
  } else if (r.leak_suspected()) {
    const LeakGroup& g = r.growing.front();
    o += "LEAK: " + FrameFilter::site_text(s, g.site, true) + " keeps " + std::to_string(g.allocations) +
         " more allocation(s) alive over " + std::to_string(m) + " iterations (+" + size(g.bytes_per_iteration) +
         " per iteration)\n";
  } else if (!r.judged()) {
    o += std::string(r.held.empty() ? "" : "gradients are held across optimizer steps; ") + "too few iterations to " +
         "judge leaks: " + std::to_string(m) + " boundar" + (m == 1 ? "y" : "ies") + ", and a trend needs " +
         std::to_string(r.boundaries_needed) +
         (r.iterations.source == Iterations::Source::kAnnotations ? " (record more optimizer steps)\n"
                                                                   : " (record more iterations of the loop)\n");
  } else if (r.pool_growth_suspected()) {
    const PoolGrowth& g = r.pools_growing.front();
    o += "GROWTH: " + std::string(owner_label(g.owner)) + " reserves more at every iteration start after warm-up (+" +
         size(g.bytes_per_iteration) + " per iteration over the last " +
         std::to_string(m - g.warmup_boundaries) + " of " + std::to_string(m) + " iterations)" +
         (g.sites.empty() ? std::string() : ", most at " + FrameFilter::site_text(s, g.sites.front().site, true)) +
         ": this capture sees the pool, not the tensors in it, and a tensor kept alive each iteration grows it so\n";
  } else if (!r.held.empty()) {
    o += "no growing leak; gradients are held across optimizer steps\n";
  } else if (!r.released.empty()) {
    const LeakGroup& g = r.released.front();
    o += "no leak at the end: " + FrameFilter::site_text(s, g.site, true) + " grew by " +
         std::to_string(g.allocations) + " allocation(s) over " + std::to_string(m) +
         " iterations, but the program freed most of it before the trace ended\n";
  } else if (r.library_reservations_left_out && !r.pools_judged) {
    // A capture: its pools hold the tensors, and too few iterations cannot tell their warm-up from a leak.
    o += "no leak among the program's own allocations; the library pools' growth is not judged: " +
         std::to_string(m) + " iterations, and telling a pool's warm-up from growth needs " +
         std::to_string(LeakReport::kPoolBoundaries) + "\n";
  } else {
    o += "no leak: nothing grows from one iteration to the next\n";
  }
  if (r.library_reservations_left_out)
    o += "  (" + std::to_string(r.library_reservations_left_out) +
         " allocation(s) reserved by a library's own pool, PyTorch's caching allocator or NCCL, are not judged here "
         "one by one, only as their pool: open PyTorch's own snapshot for its tensors)\n";
  // Repeats that all run inside module forwards, or all build the model, are not called iterations anywhere in the
  // report.
  const bool fwd = r.repeats_only();
  if (fwd)
    o += "  repeats: " + std::to_string(m) + " of a repeating allocation at " + printable(r.iterations.marker) + "\n";
  else
    o += "  iterations: " + std::to_string(m) + (m == 1 ? " boundary from " : " boundaries from ") +
         std::string(iteration_source_name(r.iterations.source)) + " (" + printable(r.iterations.marker) + ")\n";
  if (!r.growing.empty()) {
    o += fwd ? "\ngrowing across the repeats (not judged a leak; alive allocations at each repeat):\n"
             : "\ngrowing sites (alive allocations at each iteration start):\n";
    for (const LeakGroup& g : r.growing) {
      o += "  " + rpad("+" + size(g.bytes_per_iteration), 11) + (fwd ? "/repeat  " : "/iter  ") + FrameFilter::site_text(s, g.site) + "  [" +
           std::string(category_name(g.category)) + "]  counts: " + counts(g.alive_count) + "\n";
      for (FrameId f : ff.frames_from_site(s, g.stack, 4)) o += "        at " + FrameFilter::format(s, f) + "\n";
    }
  }
  for (const PoolGrowth& g : r.pools_growing) {
    o += "\n" + std::string(owner_label(g.owner)) + ": reserved at each iteration start (growing after warm-up):";
    for (size_t k = 0; k < g.reserved_at_boundary.size(); ++k) {
      if (g.reserved_at_boundary.size() > 12 && k == 5) {
        o += " ...";
        k = g.reserved_at_boundary.size() - 6;
        continue;
      }
      o += " " + size(g.reserved_at_boundary[k]);
    }
    o += "\n";
    for (const LeakGroup& site : g.sites) {
      o += "  " + rpad("+" + size(site.bytes_per_iteration), 11) + "/iter  " + FrameFilter::site_text(s, site.site) +
           "  counts: " + counts(site.alive_count) + "\n";
      for (FrameId f : ff.frames_from_site(s, site.stack, 4)) o += "        at " + FrameFilter::format(s, f) + "\n";
    }
  }
  if (!r.released.empty()) {
    o += "\ngrew, then freed before the trace ended (not held at the end):\n";
    for (const LeakGroup& g : r.released)
      o += "  " + rpad("+" + size(g.bytes_per_iteration), 11) + (fwd ? "/repeat  " : "/iter  ") +
           FrameFilter::site_text(s, g.site) + "  [" + std::string(category_name(g.category)) +
           "]  counts: " + counts(g.alive_count) + "\n";
  }
  if (!r.held.empty()) {
    o += r.judged() ? "\nmemory held across optimizer steps (not growing):\n"
                    : "\nmemory held across optimizer steps (growth not judged):\n";
    for (const LeakGroup& g : r.held)
      o += "  " + rpad(size(g.bytes_per_iteration), 10) + "  " + rpad(std::to_string(g.allocations), 5) +
           " gradient allocation(s) from " +
           (g.site == kNoFrame ? std::string("the backward pass (no frames)") : FrameFilter::site_text(s, g.site)) +
           " stay alive from one step to the next (zero_grad() missing, or called with set_to_none=False, which "
           "zeroes them in place; set_to_none=True frees them)\n";
  }
  // A long run prints its ends: the floor's trend shows there, and 600 numbers help nobody.
  o += fwd ? "\nactive bytes at each repeat:" : "\nactive bytes at each iteration start:";
  const size_t n = r.total_at_boundary.size();
  for (size_t k = 0; k < n; ++k) {
    if (n > 12 && k == 5) {
      o += " ...";
      k = n - 6;
      continue;
    }
    o += " " + size(r.total_at_boundary[k]);
  }
  o += "\n";
  return o;
}

}  // namespace allocscope
