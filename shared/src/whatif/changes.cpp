// The changes `whatif` and `plan` know: their flags, the line that makes each, what each costs the user, and which
// model applies it (change_*.cpp).
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "allocscope/memviz.h"
#include "whatif/changes_impl.h"
#include "whatif/run_model.h"

namespace allocscope {

namespace {
std::string number(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}
}  // namespace

std::string WhatIfChange::flag() const {
  switch (kind) {
    case Kind::kAccumulate: return "--accumulate " + number(value);
    case Kind::kPrecision: return "--precision " + text;
    case Kind::kOptimizer: return "--optimizer " + text;
    case Kind::kCheckpoint: return "--checkpoint " + text;
    case Kind::kZeroGrad: return "--zero-grad " + text;
    case Kind::kAllocator: return "--allocator " + settings.text();
    case Kind::kShard: return "--shard " + text + " --world-size " + number(value);
    case Kind::kOffload: return "--offload " + text;
  }
  return "";
}

std::string WhatIfChange::code() const {
  switch (kind) {
    case Kind::kAccumulate:
      return "loss = loss / " + number(value) + "; loss.backward(); step the optimizer every " + number(value) +
             " micro-batches of batch/" + number(value);
    case Kind::kPrecision:
      return text == "bf16-autocast" ? "with torch.autocast(\"cuda\", dtype=torch.bfloat16): loss = model(x) ..."
                                     : "model = model.to(torch.bfloat16)  # weights, gradients and optimizer state";
    case Kind::kOptimizer:
      if (text == "sgd") return "torch.optim.SGD(model.parameters(), lr=...)";
      if (text == "sgd-momentum") return "torch.optim.SGD(model.parameters(), lr=..., momentum=0.9)";
      if (text == "adamw") return "torch.optim.AdamW(model.parameters(), lr=...)";
      if (text == "adamw-fused") return "torch.optim.AdamW(model.parameters(), lr=..., fused=True)";
      if (text == "adafactor") return "torch.optim.Adafactor(model.parameters(), lr=...)";
      return "bitsandbytes.optim.AdamW8bit(model.parameters(), lr=...)";
    case Kind::kCheckpoint:
      return text == "all" ? "torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False) around each repeated "
                             "block (transformers: model.gradient_checkpointing_enable())"
                           : "torch.utils.checkpoint.checkpoint(module, x, use_reentrant=False) for the modules "
                             "matching " + text;
    case Kind::kZeroGrad:
      return text == "none" ? "optimizer.zero_grad(set_to_none=True)" : "optimizer.zero_grad(set_to_none=False)";
    case Kind::kAllocator: return "PYTORCH_CUDA_ALLOC_CONF=" + settings.text();
    case Kind::kShard:
      return text == "zero3" ? "torch.distributed.fsdp.fully_shard(model) on " + number(value) + " GPUs"
                             : "DeepSpeed ZeRO stage " + text.substr(4) + " on " + number(value) +
                                   " GPUs (stage 1: torch.distributed.optim.ZeroRedundancyOptimizer)";
    case Kind::kOffload: return "DeepSpeed ZeRO-Offload: \"offload_optimizer\": {\"device\": \"cpu\"}";
  }
  return "";
}

int WhatIfChange::cost() const {
  switch (kind) {
    case Kind::kAllocator: return 1;
    case Kind::kZeroGrad: return 1;
    case Kind::kOptimizer: return text == "adamw-fused" ? 1 : 3;  // fused keeps the maths; the others change it
    case Kind::kPrecision: return text == "bf16-autocast" ? 2 : 3;
    case Kind::kCheckpoint: return 2;
    case Kind::kAccumulate: return 2;
    case Kind::kOffload: return 3;
    case Kind::kShard: return 3;
  }
  return 3;
}

Result<WhatIfChange> parse_change(std::string_view flag, std::string_view value, double world_size) {
  using K = WhatIfChange::Kind;
  WhatIfChange c;
  const std::string v(value);
  auto one_of = [&](std::initializer_list<const char*> allowed) {
    for (const char* a : allowed)
      if (v == a) return true;
    return false;
  };
  if (flag == "accumulate") {
    char* end = nullptr;
    const double k = std::strtod(v.c_str(), &end);
    if (v.empty() || *end || !(k >= 1) || k > 4096 || k != std::floor(k))
      return Error{"--accumulate takes the micro-batches per optimizer step, a whole number from 1 to 4096"};
    c.kind = K::kAccumulate;
    c.value = k;
  } else if (flag == "precision") {
    if (!one_of({"bf16-autocast", "bf16-weights"})) return Error{"--precision takes bf16-autocast or bf16-weights"};
    c.kind = K::kPrecision;
    c.text = v;
  } else if (flag == "optimizer") {
    if (!one_of({"sgd", "sgd-momentum", "adamw", "adamw-fused", "adafactor", "adam-8bit"}))
      return Error{"--optimizer takes sgd, sgd-momentum, adamw, adamw-fused, adafactor or adam-8bit"};
    c.kind = K::kOptimizer;
    c.text = v;
  } else if (flag == "checkpoint") {
    if (v.empty()) return Error{"--checkpoint takes all, or a regex of the module frames to recompute"};
    c.kind = K::kCheckpoint;
    c.text = v;
  } else if (flag == "zero-grad") {
    if (!one_of({"none", "zeros"})) return Error{"--zero-grad takes none (set_to_none=True) or zeros"};
    c.kind = K::kZeroGrad;
    c.text = v;
  } else if (flag == "allocator") {
    auto s = parse_allocator_settings(v);
    if (!s.ok()) return Error{"--allocator: " + s.error().message};
    c.kind = K::kAllocator;
    c.settings = s.value();
  } else if (flag == "shard") {
    if (!one_of({"zero1", "zero2", "zero3"})) return Error{"--shard takes zero1, zero2 or zero3"};
    if (!(world_size >= 2) || world_size > 1e6 || world_size != std::floor(world_size))
      return Error{"--shard needs --world-size N, the number of GPUs (2 or more)"};
    c.kind = K::kShard;
    c.text = v;
    c.value = world_size;
  } else if (flag == "offload") {
    if (v != "optimizer") return Error{"--offload takes optimizer"};
    c.kind = K::kOffload;
    c.text = v;
  } else {
    return Error{"no change named --" + std::string(flag)};
  }
  return c;
}

namespace whatif_detail {

std::string bytes_text(uint64_t b) { return memviz::format_size(b); }

Status apply_change(const WhatIfChange& change, RunModel* m, std::vector<WhatIfEffect>* effects) {
  using K = WhatIfChange::Kind;
  std::string what;
  Status st;
  switch (change.kind) {
    case K::kAccumulate: st = apply_accumulate(change, m, &what); break;
    case K::kPrecision: st = apply_precision(change, m, &what); break;
    case K::kOptimizer: st = apply_optimizer(change.text, m, &what); break;
    case K::kCheckpoint: st = apply_checkpoint(change, m, &what); break;
    case K::kZeroGrad: st = apply_zero_grad(change, m, &what); break;
    case K::kAllocator:
      m->settings = change.settings;
      what = change.settings.garbage_collection_threshold > 0
                 ? "the allocator replayed with these settings; garbage_collection_threshold acts only near a "
                   "per-process cap, where the replay already frees the cache before giving up"
                 : "the allocator replayed with these settings";
      break;
    case K::kShard: st = apply_shard(change, m, &what); break;
    case K::kOffload: st = apply_optimizer("offload", m, &what); break;
  }
  if (!st.ok()) return Error{change.flag() + ": " + st.error().message};
  effects->push_back({change.flag(), what});
  return {};
}

}  // namespace whatif_detail
}  // namespace allocscope
