// What each allocation is, in PyTorch's Memory Profiler's taxonomy (parameter, gradient, optimizer state, activation,
// input, temporary, autograd detail, unknown), inferred from its stack and lifetime (heuristics in docs/analyses.md,
// measured against the profiler on tests/fixtures/categories_oracle), with user regex rules taking precedence.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "allocscope/frame_filter.h"
#include "allocscope/iterations.h"
#include "allocscope/lifetimes.h"
#include "allocscope/result.h"

namespace allocscope {

// kUnknown stays last: tables index by category and treat the last as "no answer".
enum class Category : uint8_t {
  kParameter,
  kGradient,
  kOptimizerState,
  kActivation,
  kInput,           // the batch: made before the forward pass and read by it
  kTemporary,       // born and freed within one step of its iteration outside the backward pass
  kAutogradDetail,  // the backward pass's own outputs that are not gradients (gradients of activations)
  kUnknown,         // includes library workspaces (cuBLAS, cuDNN): the reason says so
};
constexpr int kCategoryCount = 8;
std::string_view category_name(Category c);  // "parameter", "gradient", "optimizer_state", ...
std::optional<Category> category_from_name(std::string_view name);

// Which evidence decided (shown to users so a wrong guess can be corrected with a rule).
enum class CategoryReason : uint8_t {
  kRule,            // a user rule matched a frame
  kOptimizerFrame,  // a frame in torch/optim (long-lived: state; short-lived: the step's temporaries)
  kBackwardFrame,   // autograd engine / AccumulateGrad / .backward() frames
  kParameterFrame,  // module construction or moves: __init__, reset_parameters, _apply, to, cuda
  kForwardFrame,    // a module's forward (saved for the backward or not, as the profiler floods it)
  kEngineThread,    // no frames at all in a trace that records Python stacks: the autograd engine's threads
  kWorkspace,       // a cuBLAS/cuBLASLt/cuDNN workspace: allocated by the library, not a tensor
  kBeforeTrace,     // alive before recording started and never freed: the model's weights
  kBeforeForward,   // made before its iteration's forward pass and alive into it: the input batch
  kLifetime,        // only the lifetime spoke (freed within its iteration)
  kNoEvidence,
  kReservation,     // a capture's allocation: an allocator's or library's reservation, not one tensor (owners.h)
  kDdpBucket,       // DistributedDataParallel's gradient buckets (c10d::Reducer): one copy of the gradients
  kFsdp,            // FullyShardedDataParallel's all-gathers (parameters) and reduce-scatters (gradients)
};
std::string_view category_reason_name(CategoryReason r);

// `pattern` is an ECMAScript regex searched in each frame's "full/filename.py:LINE:name".
// Library workspaces, by the C++ frame that asks the allocator for them: cuBLAS/cuBLASLt (setWorkspaceForHandle,
// getCUDABlasLtWorkspace: a fixed size per handle) or cuDNN (a convolution plan's or attention's workspace, sized by
// the shapes). The one rule categories and what-if both use.
enum class WorkspaceKind : uint8_t { kNone, kCublas, kCudnn };
WorkspaceKind workspace_frame(std::string_view frame_name);

// A rule's regex searches a frame's "file:line:name" text, its first kRuleTextLimit characters (std::regex recurses
// per character matched: a longer text could overflow the stack).
constexpr size_t kRuleTextLimit = 2048;
struct CategoryRule {
  std::string pattern;
  Category category = Category::kUnknown;
};
struct CategoryOptions {
  std::vector<CategoryRule> rules;  // first match wins, before any heuristic
};
// Why `pattern` is not an ECMAScript regex std::regex accepts ("" when it is), found without exceptions: the wasm
// build cannot catch std::regex's syntax errors. Conservative: backreferences, repeat counts above 1000, and nested
// repetition (a repeated group with a repeat inside: exponential backtracking) are refused.
std::string regex_problem(std::string_view pattern);
// Parses "REGEX=category" (the CLI's --rule); the category name is after the last '='.
Result<CategoryRule> parse_category_rule(std::string_view text);

// Per StackId: 1 when the stack runs inside a module's forward (a `forward`, `_call_impl` or `_wrapped_call_impl`
// frame) and in no backward or optimizer frame. The frame evidence categorize() reads, before any user rule or
// size guess decides a row: leaks' forward-only check (leaks.h) asks the frames, not the decided category.
std::vector<uint8_t> forward_stacks(const Snapshot& s);
// Per StackId: 1 when the stack builds or moves a model's weights (Module.__init__, reset_parameters, .cuda(), .to(),
// load_state_dict, Hugging Face's weight init: the frames categorize() reads as a parameter's), outside any forward,
// backward or optimizer frame. Such a stack repeats once per layer: leaks' setup-only check (leaks.h) asks it whether
// guessed iterations are a model's layers.
std::vector<uint8_t> model_building_stacks(const Snapshot& s);

struct Categories {
  std::vector<Category> category;      // per lifetimes row
  std::vector<CategoryReason> reason;  // per lifetimes row
};

// Errors only for rules whose regex does not compile.
Result<Categories> categorize(const Snapshot& s, const DeviceLifetimes& lt, const Iterations& it,
                              const FrameFilter& ff, const CategoryOptions& options = {});

struct CategoryTotals {
  std::array<uint64_t, kCategoryCount> bytes{};
  std::array<uint32_t, kCategoryCount> count{};
};
// Bytes and allocations of each category alive at `step`.
CategoryTotals category_totals_at(const DeviceLifetimes& lt, const Categories& c, uint32_t step);

std::string to_json(const Snapshot& s, const DeviceLifetimes& lt, const Categories& c, uint32_t step);
// Bytes per category at `step`, each with its largest sites.
std::string to_text(const Snapshot& s, const DeviceLifetimes& lt, const Categories& c, const FrameFilter& ff,
                    uint32_t step);

}  // namespace allocscope
