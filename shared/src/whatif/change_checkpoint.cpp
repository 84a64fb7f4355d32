// Activation checkpointing: a checkpointed module keeps only its input and output from its forward; what it saved for
// the backward is freed when its forward returns and made again just before its backward (recomputed), one module at
// a time. Modules are found in the Python stacks: a `forward` frame and the line that called it (past nn.Module's
// __call__ plumbing); the calls of one module in a step are told apart by time (a call's rows are consecutive, and a
// new call starts its forward's lines from the top again). `all` picks the repeated module that saved the most
// (a transformer's blocks); a regex picks the modules whose "FILE:LINE:forward <- CALLER" text it matches.
#include <algorithm>
#include <map>
#include <regex>
#include <unordered_map>
#include <utility>

#include "allocscope/frame_filter.h"
#include "whatif/changes_impl.h"
#include "whatif/internal.h"
#include "whatif/run_model.h"

namespace allocscope::whatif_detail {
namespace {

bool python_file(std::string_view file) { return file.size() > 3 && file.substr(file.size() - 3) == ".py"; }

// Frames between a call site and the module's forward: nn.Module's __call__, hooks, checkpoint wrappers, and the
// interpreter's own C++ frames (stacks='all' interleaves them).
bool plumbing(std::string_view file, std::string_view fn) {
  return !python_file(file) || fn == "_call_impl" || fn == "_wrapped_call_impl" || fn == "__call__" || fn == "inner" ||
         fn == "_call" || file.find("torch/nn/modules/module.py") != std::string_view::npos ||
         file.find("torch/utils/checkpoint.py") != std::string_view::npos ||
         file.find("torch/_dynamo/") != std::string_view::npos;
}

struct Call {
  uint32_t key;    // the module: its forward's code and its call site
  int64_t line;    // the forward's line this row was made at
  uint32_t depth;  // frames from the outermost (smaller: outer)
  uint64_t below;  // the Python frames inside the forward (its callees), hashed: what this row's line ran
};

struct Modules {
  std::vector<std::string> key_text;               // "FILE:LINE:forward <- CALLER" (full paths: what a regex reads)
  std::vector<std::string> key_name;               // the same with file names only, to show
  std::vector<uint8_t> key_loops;                  // its forward is a container's loop over its children
  std::vector<std::vector<Call>> calls_of_stack;   // per stack id, its module calls
};

Modules find_modules(const RunModel& m) {
  const Snapshot& s = *m.snapshot;
  Modules out;
  out.calls_of_stack.resize(s.stacks.size());
  std::vector<uint8_t> done(s.stacks.size(), 0);
  std::map<std::pair<std::string, FrameId>, uint32_t> keys;  // (forward's file:function, call site) -> key
  for (uint32_t i = 0; i < m.count(); ++i) {
    const StackId id = m.stack[i];
    if (id >= s.stacks.size() || done[id]) continue;
    done[id] = 1;
    const auto frames = s.stack(id);  // innermost first
    for (size_t p = 0; p < frames.size(); ++p) {
      const Frame& f = s.frames[frames[p]];
      const std::string_view file = s.str(f.filename), fn = s.str(f.name);
      if (fn != "forward" || !python_file(file)) continue;
      size_t q = p + 1;
      while (q < frames.size() && plumbing(s.str(s.frames[frames[q]].filename), s.str(s.frames[frames[q]].name))) ++q;
      if (q >= frames.size()) continue;
      const auto [it, added] = keys.emplace(std::make_pair(std::string(file) + ":forward", frames[q]),
                                            static_cast<uint32_t>(out.key_text.size()));
      if (added) {
        out.key_text.push_back(FrameFilter::format(s, frames[p], true) + " <- " +
                               FrameFilter::format(s, frames[q], true));
        out.key_name.push_back(FrameFilter::format(s, frames[p]) + " <- " + FrameFilter::format(s, frames[q]));
        out.key_loops.push_back(file.find("torch/nn/modules/container.py") != std::string_view::npos);
      }
      // FNV-1a over the Python frames' ids: the C++ ones name the kernel, which differs by shape (a depthwise and a
      // pointwise convolution) and by the stacks a recording kept.
      uint64_t below = 1469598103934665603ull;
      for (size_t k = 0; k < p; ++k)
        if (python_file(s.str(s.frames[frames[k]].filename))) below = (below ^ frames[k]) * 1099511628211ull;
      out.calls_of_stack[id].push_back({it->second, f.line, static_cast<uint32_t>(frames.size() - 1 - p), below});
    }
  }
  return out;
}

const Call* call_of(const Modules& mods, const RunModel& m, uint32_t row, uint32_t key) {
  if (m.stack[row] >= mods.calls_of_stack.size()) return nullptr;
  for (const Call& c : mods.calls_of_stack[m.stack[row]])
    if (c.key == key) return &c;
  return nullptr;
}

// One call of a module in a step: the forward rows made inside it.
struct Instance {
  std::vector<uint32_t> rows;
};

// Calls back to back (a Sequential's blocks) show no gap, and where the forward is one line (torchvision's inverted
// residual: `return x + self.conv(x)`, or `return self.conv(x)` in the next block) no line goes back up, so such calls
// come out as one (MobileNetV2 checkpointed read 1.174 allocated, its 17 blocks taken as 6 calls a step). For a module
// that repeats, with a forward of one line, the way most of its calls start (the Python frames inside the forward of
// their first kStart tensors) is how a call starts: seen again inside a call, the next one starts there. Not for a
// container's own loop, whose children start as they each do; not for a forward of several lines, whose lines say
// where its calls start (a ViT block's second line starts with a norm as its first does). `calls`: each row's call.
std::vector<Instance> split_one_line_calls(const RunModel& m, std::vector<Instance> out,
                                           const std::vector<std::vector<const Call*>>& calls) {
  // Two ops and a little: an expansion's convolution, its batch norm's three rows, its activation and the depthwise
  // convolution after, where a block's depthwise convolution is followed by its projection.
  constexpr size_t kStart = 6;
  const bool one_line = std::any_of(calls.begin(), calls.end(), [](const std::vector<const Call*>& cs) {
    return std::all_of(cs.begin(), cs.end(), [&](const Call* c) { return c->line == cs[0]->line; });
  });
  if (!one_line) return out;
  // Each call's rows that are a tensor's (a library's workspace comes before or after its op's output as the library
  // picks).
  std::vector<std::vector<size_t>> tensors(out.size());
  for (size_t k = 0; k < out.size(); ++k)
    for (size_t x = 0; x < out[k].rows.size(); ++x)
      if (m.reason[out[k].rows[x]] != CategoryReason::kWorkspace) tensors[k].push_back(x);
  std::map<std::vector<uint64_t>, uint32_t> starts;
  for (size_t k = 0; k < out.size(); ++k) {
    if (tensors[k].size() < kStart) continue;
    std::vector<uint64_t> p(kStart);
    for (size_t j = 0; j < kStart; ++j) p[j] = calls[k][tensors[k][j]]->below;
    ++starts[p];
  }
  const std::vector<uint64_t>* common = nullptr;
  uint32_t most = 1;  // seen starting two calls at least
  for (const auto& [p, n] : starts)
    if (n > most) most = n, common = &p;
  if (!common) return out;
  std::vector<Instance> split;
  for (size_t k = 0; k < out.size(); ++k) {
    const std::vector<size_t>& at = tensors[k];
    std::vector<uint8_t> cut(out[k].rows.size(), 0);
    for (size_t a = 1; a + kStart <= at.size(); ++a) {
      bool starts_here = true;
      for (size_t j = 0; starts_here && j < kStart; ++j) starts_here = calls[k][at[a + j]]->below == (*common)[j];
      cut[at[a]] = starts_here;
    }
    split.emplace_back();
    for (size_t x = 0; x < out[k].rows.size(); ++x) {
      if (cut[x]) split.emplace_back();
      split.back().rows.push_back(out[k].rows[x]);
    }
  }
  return split;
}

// The calls of module `key` among the forward rows `fwd` (one step's, in birth order).
std::vector<Instance> instances(const Modules& mods, const RunModel& m, const std::vector<uint32_t>& fwd,
                                uint32_t key) {
  std::vector<Instance> out;
  std::vector<std::vector<const Call*>> calls;  // per call, each row's
  bool open = false;
  int64_t last_line = 0;
  for (uint32_t i : fwd) {
    const Call* c = call_of(mods, m, i, key);
    if (!c) {
      open = false;  // other code ran: the call (if any) has returned
      continue;
    }
    if (!open || c->line < last_line) out.emplace_back(), calls.emplace_back();  // a call starts from the top
    out.back().rows.push_back(i);
    calls.back().push_back(c);
    open = true;
    last_line = c->line;
  }
  if (out.size() < 2 || mods.key_loops[key]) return out;
  return split_one_line_calls(m, std::move(out), calls);
}

// When each row of one checkpointed call dies in its forward, which runs without autograd: a tensor then lives as
// long as Python holds it, not until the backward. Read from the rows' Python frames below the module's forward
// (checked on the tuning jobs' own checkpointed runs, plan_runs/checkpointed: gpt_sdpa's block frees its qkv output,
// bound to q, k and v, when the block returns, and the argument it passed to ln1 when qkv returns):
// - a line's result (its last tensor of at least a quarter of the line's largest) is a local, alive until the call it
//   was made in returns; the result of a call's last line is what the call returns, judged again one level out;
// - any other row is an operand, alive until the next call on its line (which reads it) returns, or the line ends.
std::vector<uint32_t> no_grad_deaths(const RunModel& m, const Instance& inst, const std::vector<const Call*>& calls) {
  const Snapshot& s = *m.snapshot;
  const size_t n = inst.rows.size();
  std::vector<std::vector<FrameId>> path(n);  // the module's forward frame, then the Python frames inward
  size_t depth = 0;
  for (size_t x = 0; x < n; ++x) {
    const auto frames = s.stack(m.stack[inst.rows[x]]);
    const size_t top = frames.size() - 1 - calls[x]->depth;
    for (size_t q = top + 1; q-- > 0;) {
      const Frame& f = s.frames[frames[q]];
      if (q == top || !plumbing(s.str(f.filename), s.str(f.name))) path[x].push_back(frames[q]);
    }
    depth = std::max(depth, path[x].size());
  }
  // nn.Sequential's loop (`input = module(input)`): a loop line's value is its last child's result (the call returns
  // it). MobileNet's checkpointed recordings free each child's output when the next child returns. (Telling apart
  // the calls of a Sequential inside a Sequential, whose frames are the same in each, moved no run once a call's
  // output was no longer taken from a norm's saved statistics, and was dropped.)
  auto loop_frame = [&](FrameId id) {
    const Frame& f = s.frames[id];
    return s.str(f.name) == "forward" && s.str(f.filename).find("torch/nn/modules/container.py") != std::string_view::npos;
  };
  const uint32_t end = m.birth[inst.rows[n - 1]];
  std::vector<uint32_t> out(n, end + 1);
  // Runs are looked up per depth in tables of n entries each: a call too large for them (a whole model's forward of
  // millions of rows, checkpointed as one module) keeps its operands and values to the module's end.
  if (n * depth > (2u << 20)) return out;
  // Between each row and the one before: how many frames from the module's down they share (a line at depth d is
  // shared when it is > d), and one more when the first frame they differ in is the same function's (a call at depth
  // d is shared when that is > d).
  std::vector<uint32_t> line_join(n, 0), call_join(n, 0);
  for (size_t x = 1; x < n; ++x) {
    const auto& a = path[x - 1];
    const auto& b = path[x];
    size_t l = 0;
    while (l < a.size() && l < b.size() && a[l] == b[l]) ++l;
    line_join[x] = static_cast<uint32_t>(l);
    const bool same_fn = l < a.size() && l < b.size() && s.frames[a[l]].filename == s.frames[b[l]].filename &&
                         s.frames[a[l]].name == s.frames[b[l]].name;
    call_join[x] = static_cast<uint32_t>(l + (same_fn ? 1 : 0));
  }
  // first[d][x], last[d][x]: the run around x whose joins are all > d.
  struct Runs {
    std::vector<std::vector<uint32_t>> first, last;
  };
  auto runs_of = [&](const std::vector<uint32_t>& join) {
    Runs r;
    r.first.assign(depth, std::vector<uint32_t>(n));
    r.last.assign(depth, std::vector<uint32_t>(n));
    for (size_t d = 0; d < depth; ++d) {
      for (size_t x = 0; x < n; ++x) r.first[d][x] = x > 0 && join[x] > d ? r.first[d][x - 1] : static_cast<uint32_t>(x);
      for (size_t x = n; x-- > 0;) r.last[d][x] = x + 1 < n && join[x + 1] > d ? r.last[d][x + 1] : static_cast<uint32_t>(x);
    }
    return r;
  };
  const Runs lines = runs_of(line_join), fn_calls = runs_of(call_join);
  // A library's workspace made on a line (cuBLAS's, at the first matmul) is not the line's value.
  auto tensor = [&](size_t y) { return m.reason[inst.rows[y]] != CategoryReason::kWorkspace; };
  auto after = [&](size_t y) { return m.birth[inst.rows[y]] + 1; };
  // The call on line d that made row x: an operator's own row (made at that line), or a function called there.
  auto sub_call_end = [&](size_t x, size_t d) -> size_t { return path[x].size() == d + 1 ? x : fn_calls.last[d + 1][x]; };
  // A line's value: its last tensor of at least a quarter of its largest (found once per line).
  std::vector<std::vector<uint32_t>> value(depth);
  auto value_of = [&](size_t d, size_t g0, size_t g1) -> size_t {
    if (value[d].empty()) value[d].assign(n, UINT32_MAX);
    if (value[d][g0] != UINT32_MAX) return value[d][g0];
    if (loop_frame(path[g0][d])) {  // a Sequential's loop: its last child's result
      size_t last = g0;
      for (size_t y = g0; y <= g1; ++y)
        if (tensor(y)) last = y;
      return value[d][g0] = static_cast<uint32_t>(last);
    }
    uint64_t largest = 0;
    for (size_t y = g0; y <= g1; ++y)
      if (tensor(y)) largest = std::max(largest, m.size[inst.rows[y]]);
    size_t result = g0;
    for (size_t y = g0; y <= g1; ++y)
      if (tensor(y) && m.size[inst.rows[y]] * 4 >= largest) result = y;
    return value[d][g0] = static_cast<uint32_t>(result);
  };
  for (size_t x = 0; x < n; ++x) {
    for (size_t d = path[x].size(); d-- > 0;) {
      const size_t g0 = lines.first[d][x], g1 = lines.last[d][x];
      if (value_of(d, g0, g1) != x) {
        const size_t sc = std::min(sub_call_end(x, d), g1);
        out[x] = sc < g1 ? after(std::min(sub_call_end(sc + 1, d), g1)) : after(g1);
        break;
      }
      const size_t c1 = d == 0 ? n - 1 : fn_calls.last[d][x];
      if (g1 < c1) {
        out[x] = after(c1);
        break;
      }
      // The call's last line: its result is what the call returns (at the module's own level: its output, kept).
    }
    out[x] = std::max(std::min(out[x], end + 1), m.birth[inst.rows[x]] + 1);
  }
  return out;
}

}  // namespace

Status apply_checkpoint(const WhatIfChange& change, RunModel* mp, std::string* what) {
  RunModel& m = *mp;
  const Modules mods = find_modules(m);
  if (mods.key_text.empty())
    return Error{"no module forward in the stacks (checkpointing needs Python frames: record with stacks 'python' or "
                 "'all')"};
  const std::vector<uint32_t> starts = forward_starts(m);
  // Each step's forward rows, in birth order, and when its backward starts.
  const uint32_t regions = static_cast<uint32_t>(starts.size());
  std::vector<std::vector<uint32_t>> fwd(regions);
  std::vector<uint32_t> backward(regions, RunModel::kForever);
  for (uint32_t i = 0; i < m.count(); ++i) {
    if (!m.size[i] || m.failed[i] || m.birth[i] == 0) continue;
    const uint32_t r = m.region_of_tick(m.birth[i]);
    if (starts[r] == RunModel::kForever || m.birth[i] < starts[r]) continue;
    if (m.phase(i) == 2 || m.category[i] == Category::kGradient) backward[r] = std::min(backward[r], m.birth[i]);
  }
  for (uint32_t i = 0; i < m.count(); ++i) {
    if (!m.size[i] || m.failed[i] || m.birth[i] == 0) continue;
    const uint32_t r = m.region_of_tick(m.birth[i]);
    if (starts[r] == RunModel::kForever || m.birth[i] < starts[r] || m.birth[i] >= backward[r]) continue;
    fwd[r].push_back(i);
  }
  for (auto& f : fwd)
    std::stable_sort(f.begin(), f.end(), [&](uint32_t a, uint32_t b) { return m.birth[a] < m.birth[b]; });
  auto saved = [&](uint32_t i, uint32_t r) {
    return m.category[i] != Category::kInput && m.reason[i] != CategoryReason::kWorkspace &&
           backward[r] != RunModel::kForever &&
           (m.death[i] == RunModel::kForever || m.death[i] > backward[r]);
  };

  // Which modules: matching the regex, or the repeated one that covers the most saved bytes (ties: fewer calls).
  std::vector<uint32_t> chosen;
  if (change.text == "all") {
    std::vector<uint64_t> covered(mods.key_text.size(), 0);
    std::vector<uint32_t> calls(mods.key_text.size(), 0);
    for (uint32_t r = 0; r < regions; ++r) {
      std::vector<uint8_t> seen(mods.key_text.size(), 0);
      for (uint32_t i : fwd[r]) {
        if (!saved(i, r) || m.stack[i] >= mods.calls_of_stack.size()) continue;
        for (const Call& c : mods.calls_of_stack[m.stack[i]]) {
          covered[c.key] += m.size[i];
          seen[c.key] = 1;
        }
      }
      for (uint32_t k = 0; k < seen.size(); ++k)
        if (seen[k]) calls[k] = std::max<uint32_t>(calls[k], static_cast<uint32_t>(instances(mods, m, fwd[r], k).size()));
    }
    int64_t best = -1;
    for (uint32_t k = 0; k < covered.size(); ++k) {
      if (calls[k] < 2) continue;
      const double mine = static_cast<double>(covered[k]), theirs = best < 0 ? 0 : static_cast<double>(covered[best]);
      if (best < 0 || mine > theirs * 1.05 || (mine * 1.05 >= theirs && calls[k] < calls[best])) best = k;
    }
    if (best < 0) return Error{"no module is called twice or more in a step: nothing repeats to checkpoint"};
    chosen.push_back(static_cast<uint32_t>(best));
  } else {
    std::regex re;
    try {
      re = std::regex(change.text, std::regex::ECMAScript);
    } catch (const std::regex_error&) {
      return Error{"'" + change.text + "' is not a valid regex"};
    }
    for (uint32_t k = 0; k < mods.key_text.size(); ++k)
      if (std::regex_search(mods.key_text[k], re)) chosen.push_back(k);
    if (chosen.empty())
      return Error{"no module matches '" + change.text + "' (modules are named \"FILE:LINE:forward <- CALLER\"; `all` "
                   "picks the repeated blocks)"};
  }

  // Each row belongs to the outermost chosen module it was made in.
  uint64_t freed = 0;
  uint32_t checkpointed = 0;
  for (uint32_t r = 0; r < regions; ++r) {
    if (backward[r] == RunModel::kForever) continue;
    for (uint32_t key : chosen) {
      for (const Instance& inst : instances(mods, m, fwd[r], key)) {
        uint32_t end = 0;
        for (uint32_t i : inst.rows) end = std::max(end, m.birth[i]);
        // Its output (the last saved row still alive when it returns) stays: the next module keeps it as its input.
        // Not a norm's statistics made after it (MobileNet's blocks end with a batch norm, whose 128-byte mean and
        // inverse deviation are saved too): rows under 1/256 of the call's largest saved one are not outputs.
        uint64_t largest_saved = 0;
        for (uint32_t i : inst.rows)
          if (saved(i, r)) largest_saved = std::max(largest_saved, m.size[i]);
        int64_t output = -1;
        for (uint32_t i : inst.rows)
          if (saved(i, r) && m.size[i] * 256 >= largest_saved &&
              (output < 0 || m.birth[i] >= m.birth[static_cast<uint32_t>(output)]))
            output = i;
        uint32_t first_use = RunModel::kForever;
        for (uint32_t i : inst.rows)
          if (saved(i, r) && static_cast<int64_t>(i) != output) first_use = std::min(first_use, m.death[i]);
        if (first_use == RunModel::kForever || first_use <= end + 2) continue;
        ++checkpointed;
        // The checkpointed forward runs without autograd, which saves nothing: a tensor lives as long as Python
        // holds it.
        std::vector<const Call*> calls(inst.rows.size());
        for (size_t k = 0; k < inst.rows.size(); ++k) calls[k] = call_of(mods, m, inst.rows[k], key);
        const std::vector<uint32_t> deaths = no_grad_deaths(m, inst, calls);
        for (size_t k = 0; k < inst.rows.size(); ++k) {
          const uint32_t i = inst.rows[k];
          if (!saved(i, r) || static_cast<int64_t>(i) == output) continue;
          const uint32_t dies = m.death[i];
          m.death[i] = std::min(dies, deaths[k]);
          m.copy_row(i, first_use - 1, dies);  // recomputed just before its backward
          freed += m.size[i];
        }
      }
    }
  }
  std::string names;
  for (uint32_t k : chosen) names += (names.empty() ? "" : "; ") + mods.key_name[k];
  if (checkpointed == 0) {
    *what = "the modules (" + printable(names) + ") keep nothing but their outputs for the backward: checkpointing "
            "them frees nothing";
    return {};
  }
  *what = std::to_string(checkpointed) + " module calls recomputed in the backward (" + printable(names) + "): " +
          bytes_text(freed) + " they saved for it freed after each forward and made again, one module at a time";
  return {};
}

}  // namespace allocscope::whatif_detail
