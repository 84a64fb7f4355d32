// Category inference: per-frame evidence computed once, per-stack evidence once, then one pass over the rows.
#include "allocscope/categories.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <regex>
#include <unordered_set>

#include "allocscope/owners.h"

namespace allocscope {

std::string_view category_name(Category c) {
  switch (c) {
    case Category::kParameter: return "parameter";
    case Category::kGradient: return "gradient";
    case Category::kOptimizerState: return "optimizer_state";
    case Category::kActivation: return "activation";
    case Category::kInput: return "input";
    case Category::kTemporary: return "temporary";
    case Category::kAutogradDetail: return "autograd_detail";
    default: return "unknown";
  }
}

std::optional<Category> category_from_name(std::string_view name) {
  for (int i = 0; i < kCategoryCount; ++i)
    if (category_name(static_cast<Category>(i)) == name) return static_cast<Category>(i);
  if (name == "optimizer" || name == "optimizer-state" || name == "state") return Category::kOptimizerState;
  if (name == "param" || name == "parameters" || name == "weight") return Category::kParameter;
  if (name == "grad" || name == "gradients") return Category::kGradient;
  if (name == "activations") return Category::kActivation;
  if (name == "temp" || name == "temporaries") return Category::kTemporary;
  if (name == "inputs" || name == "batch") return Category::kInput;
  if (name == "autograd-detail" || name == "autograd") return Category::kAutogradDetail;
  return std::nullopt;
}

WorkspaceKind workspace_frame(std::string_view name) {
  auto has = [&](std::string_view w) { return name.find(w) != std::string_view::npos; };
  // getNewWorkspace: the name before PyTorch 2.3 (pt22_eor_nn's 8.125 MiB workspace was taken for a gradient).
  if (has("setWorkspaceForHandle") || has("getCUDABlasLtWorkspace") || has("getNewWorkspace"))
    return WorkspaceKind::kCublas;
  if (has("run_conv_plan") || has("run_cudnn_SDP")) return WorkspaceKind::kCudnn;
  return WorkspaceKind::kNone;
}

std::string_view category_reason_name(CategoryReason r) {
  switch (r) {
    case CategoryReason::kRule: return "rule";
    case CategoryReason::kOptimizerFrame: return "optimizer frame";
    case CategoryReason::kBackwardFrame: return "backward frame";
    case CategoryReason::kParameterFrame: return "module construction frame";
    case CategoryReason::kForwardFrame: return "forward frame";
    case CategoryReason::kEngineThread: return "autograd engine thread (no frames)";
    case CategoryReason::kWorkspace: return "library workspace (cuBLAS/cuDNN)";
    case CategoryReason::kBeforeTrace: return "alive before recording, never freed";
    case CategoryReason::kBeforeForward: return "made before the forward pass";
    case CategoryReason::kLifetime: return "lifetime";
    case CategoryReason::kReservation: return "a capture's reservation, not a tensor (see owners)";
    case CategoryReason::kDdpBucket: return "DDP gradient bucket";
    case CategoryReason::kFsdp: return "FSDP all-gather or reduce-scatter";
    default: return "no evidence";
  }
}

Result<CategoryRule> parse_category_rule(std::string_view text) {
  const size_t eq = text.rfind('=');
  if (eq == std::string_view::npos || eq == 0) return Error{"rule must be REGEX=CATEGORY, got '" + std::string(text) + "'"};
  auto c = category_from_name(text.substr(eq + 1));
  if (!c) {
    return Error{"unknown category '" + std::string(text.substr(eq + 1)) +
                 "' (parameter, gradient, optimizer_state, activation, input, temporary, autograd_detail, unknown)"};
  }
  return CategoryRule{std::string(text.substr(0, eq)), *c};
}

namespace {

enum FrameBits : uint16_t {
  kOpt = 1, kBwd = 2, kParam = 4, kFwd = 8, kWs = 16, kCpp = 32, kDdp = 64, kFsdpParam = 128, kFsdpGrad = 256
};
using Bits = uint16_t;

// Sizes of the workspaces cuBLAS and cuBLASLt get from PyTorch's allocator, for stacks without C++ frames: 32 MiB
// (cuBLAS on Hopper and later, CUBLAS_WORKSPACE_CONFIG ":4096:8"), 4096 KiB * 2 + 16 KiB * 8 (the default before
// Hopper), 1 MiB (cuBLASLt). Seen in every loop of tests/fixtures/categories_oracle; the profiler calls them unknown.
bool workspace_size(uint64_t b) { return b == (32ull << 20) || b == (8ull << 20) + (128ull << 10) || b == (1ull << 20); }

bool has(std::string_view s, std::string_view w) { return s.find(w) != std::string_view::npos; }

Bits frame_bits(std::string_view name, std::string_view file_as_written) {
  std::string buf;
  const std::string_view file = posix_path(file_as_written, &buf);
  Bits b = 0;
  if (has(file, "/torch/optim/")) b |= kOpt;
  if (has(name, "AccumulateGrad") || has(name, "accumulate_grad") || has(name, "autograd::Engine") ||
      has(name, "_engine_run_backward") ||
      (name == "backward" && (has(file, "torch/_tensor.py") || has(file, "/torch/autograd/"))))
    b |= kBwd;
  // Building or moving modules: parameters and buffers are born here (nn.Linear(..., device='cuda'), .cuda(),
  // .to(), load_state_dict, Hugging Face's weight init).
  const bool nn_file = has(file, "/torch/nn/");
  if ((nn_file && (name == "__init__" || name == "reset_parameters" || name == "_apply" || name == "to" ||
                   name == "cuda" || name == "<lambda>" || name == "_load_from_state_dict" ||
                   name == "load_state_dict" || name == "half" || name == "bfloat16" || name == "float")) ||
      name == "_init_weights" || name == "post_init" || name == "from_pretrained" || name == "tie_weights")
    b |= kParam;
  if (name == "forward" || name == "_call_impl" || name == "_wrapped_call_impl") b |= kFwd;
  // DistributedDataParallel's gradient buckets: made when its Reducer is built (in DDP's __init__, which the
  // module-construction rule above would take for parameters) and rebuilt in the first forward after it (which the
  // forward rule would take for an activation); a bucket is as large as the gradients it carries (ddp_rank0: 128 MiB
  // read as activations). The Python frames name the two places for stacks without C++ frames.
  if (has(name, "c10d::Reducer::initialize_buckets") ||
      (has(file, "/torch/nn/parallel/distributed.py") && (name == "_ddp_init_helper" || name == "_pre_forward")))
    b |= kDdp;
  // FullyShardedDataParallel (FSDP2's fully_shard and FSDP1): what its all-gathers make is the unsharded parameters
  // (and the buffers they are gathered through); what its reduce-scatters make is the gradients' shards (and their
  // staging). Inside forward and backward calls, the rules below took them for activations and autograd buffers;
  // PyTorch's profiler calls them parameters and gradients (categories_oracle/fsdp2_mlp_adamw).
  if (has(file, "/torch/distributed/fsdp/")) {
    if (name == "foreach_all_gather" || name == "foreach_all_gather_copy_out" || name == "alloc_all_gather_outputs" ||
        name == "init_all_gather_outputs" || name == "_alloc_padded_unsharded_flat_param" ||
        name == "_all_gather_flat_param")
      b |= kFsdpParam;
    if (name == "foreach_reduce" || name == "foreach_reduce_scatter_copy_in" || name == "_reduce_grad" ||
        name == "_reduce_grad_no_shard")
      b |= kFsdpGrad;
  }
  if (workspace_frame(name) != WorkspaceKind::kNone) b |= kWs;
  if (!has(file, ".py")) b |= kCpp;
  return b;
}


}  // namespace

// std::regex reports syntax errors only by throwing, and the wasm build cannot catch (DISABLE_EXCEPTION_CATCHING
// turns a throw into an abort). So the pattern is checked against the ECMAScript grammar's error cases first and a
// bad user rule is an Error value on every platform; the native try/catch stays as a second net.
std::string regex_problem(std::string_view p) {
  static constexpr const char* kAmbiguousRepeat =
      "a repeated group whose alternatives can start alike (like (a|ab)*) can take exponential time on a frame's text; "
      "begin each alternative with a different character, or repeat a class such as [ab]*";
  if (p.size() > 1000) return "pattern longer than 1000 characters";
  auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
  // Checks an escape at p[i] == '\\'; returns false on error and moves i to its last character. `*cls` is set
  // when it stands for a class (\d, \w, \s ...), which cannot be a range end.
  auto escape = [&](size_t& i, std::string* err, bool* cls, bool* assertion) -> bool {
    if (i + 1 >= p.size()) return *err = "trailing backslash", false;
    const char e = p[++i];
    *cls = e == 'd' || e == 'D' || e == 'w' || e == 'W' || e == 's' || e == 'S';
    *assertion = e == 'b' || e == 'B';
    if (e == 'c') {
      if (i + 1 >= p.size() || !std::isalpha(static_cast<unsigned char>(p[i + 1]))) return *err = "\\c needs a letter", false;
      ++i;
    } else if (e == 'x' || e == 'u') {
      const size_t n = e == 'x' ? 2 : 4;
      for (size_t k = 1; k <= n; ++k)
        if (i + k >= p.size() || !hex(p[i + k])) return *err = std::string("\\") + e + " needs hex digits", false;
      i += n;
    } else if (e >= '1' && e <= '9') {
      return *err = "backreferences are not supported", false;
    }
    return true;
  };
  std::string err;
  int depth = 0;
  bool can_repeat = false;
  // An upper bound of the automaton's size: libstdc++ throws error_space past 100,000 states, and a counted repeat
  // of a group copies the group (so "(a{1000}){1000}" is a million states).
  uint64_t size = 0, last = 0;
  std::vector<uint64_t> outer;
  // Nested repetition ("(a+)+", "(\w+_?)+x", "(.*)*"): std::regex backtracks exponentially on some texts and has
  // no time limit (an audit: a 34-character frame name ran for minutes). `repeats`: the current group has a
  // repeat inside; `group_repeats`: the atom just closed is a group that has one.
  bool repeats = false, group_repeats = false;
  std::vector<uint8_t> outer_repeats;
  // Alternatives that can start the same way ("(a|a)*", "(a|ab)+", "(\w|_)*"): each repetition may take either, so
  // the ways to match grow exponentially too. A repeated group's alternatives must each begin with a different plain
  // character ("(adam|sgd)+" is fine); anything else there (a class, '.', a group, an empty alternative) is taken to
  // be ambiguous. `group_ambiguous`: the atom just closed is a group with such alternatives (or holds one).
  struct Alternatives {
    bool bar = false, unclear = false, expect_first = true, inner = false;
    std::string firsts;
  };
  std::vector<Alternatives> alts(1);
  bool group_ambiguous = false;
  for (size_t i = 0; i < p.size(); ++i) {
    if (size > 20000) return "pattern too large once its repeats are expanded";
    const char c = p[i];
    if (c != '*' && c != '+' && c != '?' && c != '{') group_repeats = group_ambiguous = false;  // only a quantifier binds
    if (Alternatives& a = alts.back(); a.expect_first && c != '|' && c != ')') {
      a.expect_first = false;
      char first = 0;
      if (std::strchr("\\.[()^$|*+?{", c) == nullptr) first = c;
      else if (c == '\\' && i + 1 < p.size() && !std::isalnum(static_cast<unsigned char>(p[i + 1]))) first = p[i + 1];
      if (!first || a.firsts.find(first) != std::string::npos) a.unclear = true;
      else a.firsts.push_back(first);
    }
    if (c != '(' && c != ')' && c != '*' && c != '+' && c != '?' && c != '{') {
      size += 2;
      last = 2;
    }
    if (c == '\\') {
      bool cls = false, assertion = false;
      if (!escape(i, &err, &cls, &assertion)) return err;
      can_repeat = !assertion;
    } else if (c == '(') {
      if (i + 1 < p.size() && p[i + 1] == '?') {
        if (i + 2 >= p.size() || (p[i + 2] != ':' && p[i + 2] != '=' && p[i + 2] != '!')) return "unsupported (? group";
        i += 2;
      }
      ++depth;
      outer.push_back(size);
      size = 0;
      outer_repeats.push_back(repeats);
      repeats = false;
      alts.emplace_back();
      can_repeat = false;
    } else if (c == ')') {
      if (depth == 0) return "unbalanced ')'";
      --depth;
      last = size + 2;
      size = outer.back() + last;
      outer.pop_back();
      group_repeats = repeats;
      repeats = outer_repeats.back() || repeats;
      outer_repeats.pop_back();
      {
        Alternatives& a = alts.back();
        if (a.bar && a.expect_first) a.unclear = true;  // "(a|)": an empty last alternative
        group_ambiguous = (a.bar && a.unclear) || a.inner;
        alts.pop_back();
        alts.back().inner = alts.back().inner || group_ambiguous;
      }
      can_repeat = true;
      continue;  // group_repeats describes this atom for a quantifier right after it
    } else if (c == '[') {
      size_t j = i + 1;
      if (j < p.size() && p[j] == '^') ++j;
      bool closed = false;
      while (j < p.size()) {
        if (p[j] == ']') {
          closed = true;
          break;
        }
        int lo = static_cast<unsigned char>(p[j]);
        bool lo_cls = false, assertion = false;
        if (p[j] == '\\') {
          if (!escape(j, &err, &lo_cls, &assertion)) return err;
          lo = -1;  // escapes other than plain characters: no range order check, but no class as an end
        }
        ++j;
        if (j + 1 < p.size() && p[j] == '-' && p[j + 1] != ']') {
          ++j;
          int hi = static_cast<unsigned char>(p[j]);
          bool hi_cls = false;
          if (p[j] == '\\') {
            if (!escape(j, &err, &hi_cls, &assertion)) return err;
            hi = -1;
          }
          if (lo_cls || hi_cls) return "a class cannot end a range";
          if (lo >= 0 && hi >= 0 && lo > hi) return "range out of order in [...]";
          ++j;
        }
      }
      if (!closed) return "unbalanced '['";
      i = j;
      can_repeat = true;
    } else if (c == '*' || c == '+' || c == '?' || c == '{') {
      if (!can_repeat) return std::string("nothing to repeat before '") + c + "'";
      if (c == '{') {
        size_t j = i + 1;
        uint64_t lo = 0, hi = 0;
        size_t digits = 0;
        while (j < p.size() && std::isdigit(static_cast<unsigned char>(p[j])) && digits < 6) lo = lo * 10 + (p[j++] - '0'), ++digits;
        if (!digits) return "'{' needs a count";
        hi = lo;
        if (j < p.size() && p[j] == ',') {
          ++j;
          size_t d2 = 0;
          hi = UINT64_MAX;
          if (j < p.size() && std::isdigit(static_cast<unsigned char>(p[j]))) hi = 0;
          while (j < p.size() && std::isdigit(static_cast<unsigned char>(p[j])) && d2 < 6) hi = hi * 10 + (p[j++] - '0'), ++d2;
        }
        if (j >= p.size() || p[j] != '}') return "bad {n,m} repeat";
        if (hi < lo) return "{n,m} with m < n";
        if (lo > 1000 || (hi != UINT64_MAX && hi > 1000)) return "repeat count above 1000";
        if (hi > 1 && group_repeats) return "nested repetition (like (a+)+) can take exponential time on a frame's text";
        if (hi > 1 && group_ambiguous) return kAmbiguousRepeat;
        if (hi > lo) repeats = true;  // a fixed count ("a{2}") has one way to match, a range several
        const uint64_t copies = (hi == UINT64_MAX ? lo : hi) + 1;
        size += last * copies;
        last *= copies;
        i = j;
      } else {
        if (c != '?' && group_repeats)
          return "nested repetition (like (a+)+) can take exponential time on a frame's text";
        if (c != '?' && group_ambiguous) return kAmbiguousRepeat;
        if (c != '?') repeats = true;
        size += 2;
        last += 2;
      }
      if (i + 1 < p.size() && p[i + 1] == '?') ++i;  // lazy quantifier
      can_repeat = false;
      group_repeats = group_ambiguous = false;
    } else if (c == '|' || c == '^' || c == '$') {
      if (c == '|') {
        Alternatives& a = alts.back();
        if (a.expect_first) a.unclear = true;  // an empty alternative
        a.bar = a.expect_first = true;
      }
      can_repeat = false;
    } else {
      can_repeat = true;
    }
  }
  if (depth != 0) return "unbalanced '('";
  if (size > 20000) return "pattern too large once its repeats are expanded";
  return "";
}

namespace {

}  // namespace

namespace {

// Per frame, its FrameBits: snapshots share few distinct frames.
std::vector<Bits> bits_of_frames(const Snapshot& s) {
  std::vector<Bits> fbits(s.frames.size());
  for (size_t i = 0; i < fbits.size(); ++i) fbits[i] = frame_bits(s.str(s.frames[i].name), s.str(s.frames[i].filename));
  return fbits;
}

// A stack's evidence is the union of its frames': the frames recorded when it was allocated, not the forward_frames
// the loader appended to a backward allocation's stack (they say where its forward op ran, and would read a gradient
// as made inside a module's forward).
Bits bits_of_stack(const Snapshot& s, const std::vector<Bits>& fbits, StackId id) {
  Bits bits = 0;
  for (FrameId f : s.recorded_stack(id))
    if (f < fbits.size()) bits |= fbits[f];
  return bits;
}

// Inside a module's forward and in no backward or optimizer frame: the forward pass proper.
bool forward_pass(Bits bits) { return (bits & kFwd) && !(bits & (kBwd | kOpt)); }

// Building or moving the model's weights, in no forward, backward, optimizer, workspace or DDP/FSDP frame.
bool model_building(Bits bits) {
  return (bits & kParam) && !(bits & (kFwd | kBwd | kOpt | kWs | kDdp | kFsdpParam | kFsdpGrad));
}

// Per StackId: whether its frames' evidence passes `test`.
std::vector<uint8_t> stacks_where(const Snapshot& s, bool (*test)(Bits)) {
  const std::vector<Bits> fbits = bits_of_frames(s);
  std::vector<uint8_t> out(s.stacks.size(), 0);
  for (StackId id = 0; id < out.size(); ++id) out[id] = test(bits_of_stack(s, fbits, id));
  return out;
}

}  // namespace

std::vector<uint8_t> forward_stacks(const Snapshot& s) { return stacks_where(s, forward_pass); }

std::vector<uint8_t> model_building_stacks(const Snapshot& s) { return stacks_where(s, model_building); }

Result<Categories> categorize(const Snapshot& s, const DeviceLifetimes& lt, const Iterations& it,
                              const FrameFilter& ff, const CategoryOptions& options) {
  (void)ff;
  std::vector<std::regex> rules;
  rules.reserve(options.rules.size());
  for (const CategoryRule& r : options.rules) {
    const std::string problem = regex_problem(r.pattern);
    if (!problem.empty()) return Error{"rule '" + r.pattern + "': invalid regex (" + problem + ")"};
    try {
      rules.emplace_back(r.pattern, std::regex::ECMAScript | std::regex::optimize);
    } catch (const std::regex_error& e) {
      return Error{"rule '" + r.pattern + "': invalid regex (" + e.what() + ")"};
    }
  }

  // Frame evidence, then stack evidence: snapshots share few distinct frames and stacks, rows share stacks.
  const size_t nf = s.frames.size();
  const std::vector<Bits> fbits = bits_of_frames(s);
  std::vector<int16_t> frule(nf, -1);
  for (size_t i = 0; i < nf && !rules.empty(); ++i) {
    // A rule sees a frame's first 2,048 characters: std::regex recurses per character matched, and a 40,000-character
    // frame name (a 240-byte .gz) overflowed the stack with ".*model" (an audit); real frames are far shorter.
    std::string text = FrameFilter::format(s, static_cast<FrameId>(i), true);
    if (text.size() > kRuleTextLimit) text.resize(kRuleTextLimit);
    for (size_t k = 0; k < rules.size(); ++k)
      if (std::regex_search(text, rules[k])) {
        frule[i] = static_cast<int16_t>(k);
        break;
      }
  }
  const uint32_t ns = s.stacks.size();
  std::vector<Bits> sbits(ns, 0);
  std::vector<int16_t> srule(ns, -1);
  std::vector<uint8_t> stack_seen(ns, 0);
  auto stack_info = [&](StackId id) {
    if (id >= ns || stack_seen[id]) return;
    stack_seen[id] = 1;
    sbits[id] = bits_of_stack(s, fbits, id);
    int best = -1;
    for (FrameId f : s.stack(id))
      if (f < nf && frule[f] >= 0 && (best < 0 || frule[f] < best)) best = frule[f];
    srule[id] = static_cast<int16_t>(best);
  };

  const uint32_t n = lt.count();
  // The stacks the entries were recorded with: frames lent to the autograd engine's frameless allocations
  // (lent_frames.h) name the line that called backward(), which says nothing of what the allocation is.
  std::vector<StackId> unlent;
  if (!s.lent_stacks.empty()) {
    unlent.resize(n);
    for (uint32_t i = 0; i < n; ++i) unlent[i] = s.unlent(lt.stack[i]);
  }
  const std::vector<StackId>& own_stack = unlent.empty() ? lt.stack : unlent;
  bool python_stacks = false, cpp_stacks = false;
  for (uint32_t i = 0; i < n; ++i) {
    stack_info(own_stack[i]);
    if (own_stack[i] != 0) python_stacks = true;
    if (own_stack[i] < ns && (sbits[own_stack[i]] & kCpp)) cpp_stacks = true;
  }
  auto bits_of = [&](uint32_t i) -> Bits { return own_stack[i] < ns ? sbits[own_stack[i]] : 0; };

  // Per region: the first step of the forward pass and of the backward pass (a backward frame, or the engine's
  // frameless threads once the region has seen a forward). What the forward leaves alive until the backward is
  // saved for it; what is made before the forward and read by it is the batch.
  const uint32_t regions = it.regions();
  const RegionIndex index(it);
  // Alive past the end of the iteration it was made in. A block never freed in the trace counts too: in the last
  // iteration, which runs to the trace's end, it cannot be seen to outlive it, yet nothing shows it freed within
  // it. With one Optimizer.step recorded, the optimizer state the first step makes is born in that last iteration
  // (a review found 25.4 GiB of AdamW state read as temporary on pt26_cs336_train).
  auto outlives = [&](uint32_t i) {
    return lt.free_event[i] == kNoEvent || lt.death_step(i) > it.region_end(index.region_of(lt.birth_step(i)));
  };
  std::vector<uint32_t> backward_start(regions, UINT32_MAX), forward_start(regions, UINT32_MAX);
  for (uint32_t i = 0; i < n; ++i) {
    if (lt.alloc_event[i] == kNoEvent) continue;
    const uint32_t b = lt.birth_step(i);
    const uint32_t r = index.region_of(b);
    const Bits bits = bits_of(i);
    if (forward_pass(bits) && forward_start[r] == UINT32_MAX) forward_start[r] = b;
    const bool bwd = (bits & kBwd) || (python_stacks && own_stack[i] == 0 && forward_start[r] != UINT32_MAX);
    if (bwd && backward_start[r] == UINT32_MAX) backward_start[r] = b;
  }

  const bool captured = is_capture(s);
  Categories out;
  out.category.assign(n, Category::kUnknown);
  out.reason.assign(n, CategoryReason::kNoEvidence);
  // Parameter sizes, to recognise gradients among what the backward pass leaves alive (a gradient has its
  // parameter's shape; cuBLAS workspaces and other caches made on the engine's threads do not).
  std::unordered_set<uint64_t> param_sizes;
  std::vector<uint32_t> undecided;  // backward-pass rows: gradient or not depends on parameter sizes
  std::vector<uint32_t> pretrace;   // alive before the trace, never freed, no frame evidence
  // Sizes the trace shows to be a parameter's besides the backward's gradients: FSDP's gradient shards and the
  // optimizer's state (FSDP shards: fsdp2_mlp_adamw's weights, made before the trace, read "unknown").
  std::unordered_set<uint64_t> param_shaped;
  bool fsdp_backward = false;
  for (uint32_t i = 0; i < n; ++i) {
    const StackId st = own_stack[i];
    const Bits bits = bits_of(i);
    const uint32_t birth = lt.birth_step(i), death = lt.death_step(i);
    const uint32_t region = index.region_of(birth);
    const bool outlives_region = outlives(i);
    const bool traced = lt.origin[i] == LifetimeOrigin::kTraced;
    const bool never_freed = lt.free_event[i] == kNoEvent;
    const bool frameless_engine = python_stacks && st == 0 && traced;
    Category c = Category::kUnknown;
    CategoryReason why = CategoryReason::kNoEvidence;
    if (st < ns && srule[st] >= 0) {
      c = options.rules[srule[st]].category;
      why = CategoryReason::kRule;
    } else if (captured) {
      // What a caching allocator reserves holds many tensors over time, none of one kind: the taxonomy is for
      // tensors (PyTorch's own snapshots); a capture's split is by owner.
      why = CategoryReason::kReservation;
    } else if ((bits & kWs) ||
               (!cpp_stacks && never_freed && workspace_size(lt.size[i]) && (frameless_engine || (bits & kFwd)))) {
      // With C++ frames the library's function names it; with Python stacks only, a never-freed block of a
      // workspace's size made inside a forward call or on the engine's thread.
      why = CategoryReason::kWorkspace;
    } else if (bits & kDdp) {
      // A bucket lives as long as its Reducer; what DDP frees at once there (rebuild_buckets' index lists) is scratch.
      c = outlives_region ? Category::kGradient : Category::kTemporary;
      why = CategoryReason::kDdpBucket;
    } else if (bits & kFsdpParam) {
      c = Category::kParameter;  // an unsharded copy, freed after its module's forward or backward: still weights
      why = CategoryReason::kFsdp;
    } else if (bits & kFsdpGrad) {
      // The gradients' shards outlive the backward; the unsharded gradients staged for the reduce-scatter do not.
      c = outlives_region ? Category::kGradient : Category::kAutogradDetail;
      why = CategoryReason::kFsdp;
      fsdp_backward = true;
      if (outlives_region) param_shaped.insert(lt.size[i]);  // a shard's gradient has the shard's size
    } else if ((bits & kBwd) || frameless_engine) {
      undecided.push_back(i);  // a gradient only if it has a parameter's size: decided below
      continue;
    } else if (bits & kOpt) {
      c = outlives_region ? Category::kOptimizerState : Category::kTemporary;
      if (outlives_region) param_shaped.insert(lt.size[i]);  // momentum, Adam's moments: their parameter's shape
      why = CategoryReason::kOptimizerFrame;
    } else if (bits & kParam) {
      c = Category::kParameter;
      why = CategoryReason::kParameterFrame;
      param_sizes.insert(lt.size[i]);
    } else if (bits & kFwd) {
      // The profiler floods "activation" forward from the inputs: saved for backward or not, a forward's output
      // is an activation (its "temporary" is a buffer freed inside one op, which a stack cannot tell apart).
      c = Category::kActivation;
      why = CategoryReason::kForwardFrame;
    } else if (!traced) {
      // Only a block without frames: one whose frames name none of the rules above (vLLM's KV cache, an
      // optimizer's flat buffers) says what made it, and it was not a module's construction.
      if (never_freed && st == 0) {
        pretrace.push_back(i);  // the model's weights, if the backward pass says so: decided below
        continue;
      }
    } else if (forward_start[region] != UINT32_MAX && birth < forward_start[region] && death > forward_start[region]) {
      c = Category::kInput;
      why = CategoryReason::kBeforeForward;
    } else if (!outlives_region) {
      c = Category::kTemporary;
      why = CategoryReason::kLifetime;
    }
    out.category[i] = c;
    out.reason[i] = why;
  }
  // Recording often starts after the model is built: its weights are then blocks without frames, alive throughout.
  // With a backward pass in the trace, a weight is such a block with the size of a gradient the backward leaves
  // alive (so a cuBLAS workspace left by earlier work is not taken for one); in inference, every such block is.
  std::unordered_set<uint64_t> long_backward_sizes;
  for (uint32_t i : undecided)
    if (outlives(i)) long_backward_sizes.insert(lt.size[i]);
  long_backward_sizes.insert(param_shaped.begin(), param_shaped.end());
  // A CUDA graph's memory (a private pool) made before the trace is the graph's static inputs, outputs and gradients,
  // not the weights, even where it has a weight's size (graphed_mlp_sgd: its gradients read as parameters).
  std::vector<std::pair<uint64_t, uint64_t>> private_pools;
  for (const Segment& seg : s.segments)
    if (seg.device == lt.device && (seg.pool_id[0] != 0 || seg.pool_id[1] != 0))
      private_pools.push_back({seg.address, seg.address + seg.total_size});
  std::sort(private_pools.begin(), private_pools.end());
  auto in_private_pool = [&](uint64_t addr) {
    auto it = std::upper_bound(private_pools.begin(), private_pools.end(), std::make_pair(addr, UINT64_MAX));
    return it != private_pools.begin() && addr < std::prev(it)->second;
  };
  // Without a trace there is neither a backward pass nor an inference to read: a file of segments alone (memory
  // history off) says nothing of what its frameless blocks are (a benchmark's inputs read as 22 MiB of parameters).
  if (lt.event_count == 0) pretrace.clear();
  for (uint32_t i : pretrace) {
    if (in_private_pool(lt.addr[i])) continue;
    const bool backward_pass = !undecided.empty() || fsdp_backward;
    if (backward_pass && !long_backward_sizes.count(lt.size[i])) continue;
    out.category[i] = Category::kParameter;
    out.reason[i] = CategoryReason::kBeforeTrace;
    param_sizes.insert(lt.size[i]);
  }
  for (uint32_t i : undecided) {
    const bool outlives_region = outlives(i);
    out.reason[i] = own_stack[i] == 0 ? CategoryReason::kEngineThread : CategoryReason::kBackwardFrame;
    if (outlives_region && param_sizes.count(lt.size[i])) {
      out.category[i] = Category::kGradient;
    } else if (!outlives_region) {
      // Gradients of activations and each step's weight-gradient contribution before it is added into .grad.
      out.category[i] = Category::kAutogradDetail;
    }
  }
  return out;
}

CategoryTotals category_totals_at(const DeviceLifetimes& lt, const Categories& c, uint32_t step) {
  CategoryTotals t;
  for (uint32_t i = 0; i < lt.count(); ++i) {
    if (!lt.alive_at(i, step)) continue;
    const int k = static_cast<int>(c.category[i]);
    t.bytes[k] += lt.size[i];
    ++t.count[k];
  }
  return t;
}

}  // namespace allocscope
