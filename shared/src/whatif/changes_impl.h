// The models of the changes (changes.cpp dispatches to them; each edits the run model and says what it did).
#pragma once

#include <string>
#include <string_view>

#include "allocscope/result.h"
#include "allocscope/whatif.h"

namespace allocscope::whatif_detail {

struct RunModel;

std::string bytes_text(uint64_t b);  // "1.2GiB", as answers print sizes

// change_states.cpp: the optimizer's state and scratch ("offload" as a target: none of either on the GPU), and
// sharding (ZeRO stages 1-3).
Status apply_optimizer(const std::string& target, RunModel* m, std::string* what);
Status apply_shard(const WhatIfChange& c, RunModel* m, std::string* what);
// change_accumulate.cpp: gradient accumulation (applied after the other changes: it repeats what they made).
Status apply_accumulate(const WhatIfChange& c, RunModel* m, std::string* what);
// change_gradients.cpp: zero_grad's set_to_none.
Status apply_zero_grad(const WhatIfChange& c, RunModel* m, std::string* what);
// change_precision.cpp: bf16 autocast, bf16 weights.
Status apply_precision(const WhatIfChange& c, RunModel* m, std::string* what);
// change_checkpoint.cpp: activation checkpointing of repeated blocks or of modules matching a regex.
Status apply_checkpoint(const WhatIfChange& c, RunModel* m, std::string* what);

// Shared by the models: the first tick of each iteration's forward (the first activation or input born in it after
// its optimizer step's allocations), per region; RunModel::kForever where none.
std::vector<uint32_t> forward_starts(const RunModel& m);
// Whether a row's stack holds a frame whose function or file contains `needle`.
bool stack_mentions(const RunModel& m, uint32_t row, std::string_view needle);

}  // namespace allocscope::whatif_detail
