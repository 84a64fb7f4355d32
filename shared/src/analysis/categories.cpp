// Category inference: per-frame evidence computed once, per-stack evidence once, then one pass over the rows.
#include "allocscope/categories.h"

#include <algorithm>
#include <cctype>
#include <regex>
#include <unordered_set>

namespace allocscope {

std::string_view category_name(Category c) {
  switch (c) {
    case Category::kParameter: return "parameter";
    case Category::kGradient: return "gradient";
    case Category::kOptimizerState: return "optimizer_state";
    case Category::kActivation: return "activation";
    case Category::kTemporary: return "temporary";
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
  return std::nullopt;
}

std::string_view category_reason_name(CategoryReason r) {
  switch (r) {
    case CategoryReason::kRule: return "rule";
    case CategoryReason::kOptimizerFrame: return "optimizer frame";
    case CategoryReason::kBackwardFrame: return "backward frame";
    case CategoryReason::kParameterFrame: return "module construction frame";
    case CategoryReason::kForwardFrame: return "forward frame";
    case CategoryReason::kEngineThread: return "autograd engine thread (no frames)";
    case CategoryReason::kLifetime: return "lifetime";
    default: return "no evidence";
  }
}

Result<CategoryRule> parse_category_rule(std::string_view text) {
  const size_t eq = text.rfind('=');
  if (eq == std::string_view::npos || eq == 0) return Error{"rule must be REGEX=CATEGORY, got '" + std::string(text) + "'"};
  auto c = category_from_name(text.substr(eq + 1));
  if (!c) {
    return Error{"unknown category '" + std::string(text.substr(eq + 1)) +
                 "' (parameter, gradient, optimizer_state, activation, temporary, unknown)"};
  }
  return CategoryRule{std::string(text.substr(0, eq)), *c};
}

namespace {

enum FrameBits : uint8_t { kOpt = 1, kBwd = 2, kParam = 4, kFwd = 8 };

bool has(std::string_view s, std::string_view w) { return s.find(w) != std::string_view::npos; }

uint8_t frame_bits(std::string_view name, std::string_view file) {
  uint8_t b = 0;
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
  return b;
}


}  // namespace

// std::regex reports syntax errors only by throwing, and the wasm build cannot catch (DISABLE_EXCEPTION_CATCHING
// turns a throw into an abort). So the pattern is checked against the ECMAScript grammar's error cases first and a
// bad user rule is an Error value on every platform; the native try/catch stays as a second net.
std::string regex_problem(std::string_view p) {
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
  for (size_t i = 0; i < p.size(); ++i) {
    if (size > 20000) return "pattern too large once its repeats are expanded";
    const char c = p[i];
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
      can_repeat = false;
    } else if (c == ')') {
      if (depth == 0) return "unbalanced ')'";
      --depth;
      last = size + 2;
      size = outer.back() + last;
      outer.pop_back();
      can_repeat = true;
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
        const uint64_t copies = (hi == UINT64_MAX ? lo : hi) + 1;
        size += last * copies;
        last *= copies;
        i = j;
      } else {
        size += 2;
        last += 2;
      }
      if (i + 1 < p.size() && p[i + 1] == '?') ++i;  // lazy quantifier
      can_repeat = false;
    } else if (c == '|' || c == '^' || c == '$') {
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
  std::vector<uint8_t> fbits(nf);
  std::vector<int16_t> frule(nf, -1);
  for (size_t i = 0; i < nf; ++i) {
    const Frame& f = s.frames[i];
    fbits[i] = frame_bits(s.str(f.name), s.str(f.filename));
    if (!rules.empty()) {
      const std::string text = FrameFilter::format(s, static_cast<FrameId>(i), true);
      for (size_t k = 0; k < rules.size(); ++k)
        if (std::regex_search(text, rules[k])) {
          frule[i] = static_cast<int16_t>(k);
          break;
        }
    }
  }
  const uint32_t ns = s.stacks.size();
  std::vector<uint8_t> sbits(ns, 0);
  std::vector<int16_t> srule(ns, -1);
  std::vector<uint8_t> stack_seen(ns, 0);
  auto stack_info = [&](StackId id) {
    if (id >= ns || stack_seen[id]) return;
    stack_seen[id] = 1;
    int best = -1;
    for (FrameId f : s.stack(id)) {
      if (f >= nf) continue;
      sbits[id] |= fbits[f];
      if (frule[f] >= 0 && (best < 0 || frule[f] < best)) best = frule[f];
    }
    srule[id] = static_cast<int16_t>(best);
  };

  const uint32_t n = lt.count();
  bool python_stacks = false;
  for (uint32_t i = 0; i < n && !python_stacks; ++i) python_stacks = lt.stack[i] != 0;

  // Per region: the first step where the backward pass allocates (a backward frame, or the engine's frameless
  // threads once the region has seen a forward): activations are what the forward leaves alive until then.
  const uint32_t regions = it.regions();
  std::vector<uint32_t> backward_start(regions, UINT32_MAX);
  std::vector<uint8_t> saw_forward(regions, 0);
  for (uint32_t i = 0; i < n; ++i) {
    if (lt.alloc_event[i] == kNoEvent) continue;
    const uint32_t b = lt.birth_step(i);
    const uint32_t r = it.region_of(b);
    stack_info(lt.stack[i]);
    const uint8_t bits = lt.stack[i] < ns ? sbits[lt.stack[i]] : 0;
    if (bits & kFwd) saw_forward[r] = 1;
    const bool bwd = (bits & kBwd) || (python_stacks && lt.stack[i] == 0 && saw_forward[r]);
    if (bwd && backward_start[r] == UINT32_MAX) backward_start[r] = b;
  }

  Categories out;
  out.category.assign(n, Category::kUnknown);
  out.reason.assign(n, CategoryReason::kNoEvidence);
  // Parameter sizes, to recognise gradients among what the backward pass leaves alive (a gradient has its
  // parameter's shape; cuBLAS workspaces and other caches made on the engine's threads do not).
  std::unordered_set<uint64_t> param_sizes;
  std::vector<uint32_t> undecided;  // backward-pass rows: gradient or not depends on parameter sizes
  for (uint32_t i = 0; i < n; ++i) {
    const StackId st = lt.stack[i];
    stack_info(st);
    const uint8_t bits = st < ns ? sbits[st] : 0;
    const uint32_t birth = lt.birth_step(i), death = lt.death_step(i);
    const uint32_t region = it.region_of(birth);
    const bool outlives_region = death > it.region_end(region);
    Category c = Category::kUnknown;
    CategoryReason why = CategoryReason::kNoEvidence;
    if (st < ns && srule[st] >= 0) {
      c = options.rules[srule[st]].category;
      why = CategoryReason::kRule;
    } else if (bits & kBwd) {
      if (outlives_region) {
        undecided.push_back(i);  // a gradient only if it has a parameter's size: decided below
        continue;
      }
      c = Category::kTemporary;
      why = CategoryReason::kBackwardFrame;
    } else if (bits & kOpt) {
      c = outlives_region ? Category::kOptimizerState : Category::kTemporary;
      why = CategoryReason::kOptimizerFrame;
    } else if (bits & kParam) {
      c = Category::kParameter;
      why = CategoryReason::kParameterFrame;
      param_sizes.insert(lt.size[i]);
    } else if (bits & kFwd) {
      const bool saved = death > std::min(backward_start[region], it.region_end(region));
      c = saved ? Category::kActivation : Category::kTemporary;
      why = CategoryReason::kForwardFrame;
    } else if (python_stacks && st == 0 && lt.origin[i] == LifetimeOrigin::kTraced) {
      undecided.push_back(i);  // decided below, once all parameter sizes are known
      continue;
    } else if (lt.origin[i] == LifetimeOrigin::kTraced && !outlives_region) {
      c = Category::kTemporary;
      why = CategoryReason::kLifetime;
    }
    out.category[i] = c;
    out.reason[i] = why;
  }
  for (uint32_t i : undecided) {
    const uint32_t region = it.region_of(lt.birth_step(i));
    const bool outlives_region = lt.death_step(i) > it.region_end(region);
    out.reason[i] = lt.stack[i] == 0 ? CategoryReason::kEngineThread : CategoryReason::kBackwardFrame;
    if (outlives_region && param_sizes.count(lt.size[i])) {
      out.category[i] = Category::kGradient;
    } else if (!outlives_region) {
      out.category[i] = Category::kTemporary;
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
