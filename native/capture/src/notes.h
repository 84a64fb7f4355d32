// What a capture could not see, written into its snapshot (allocator_settings['allocscope_capture']['notes']) so the
// answers say it: notes from the job's bootstrap (allocscope_capture_note), and whether PyTorch's own recorder, whose
// tensors a capture alone never shows, is in the file.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "allocscope/snapshot.h"

namespace allocscope::capture {

using Notes = std::vector<std::pair<std::string, std::string>>;

// Adds `notes` under 'notes' in the snapshot's 'allocscope_capture' settings, with "torch_recorder" said when the
// process loaded PyTorch (its CUDA library is in the module map) and no note says it: "merged" for the capture part of
// a merged file (`merged`), else why this file has no PyTorch part, from the environment `allocscope record` set
// (ALLOCSCOPE_TORCH, ALLOCSCOPE_TORCH_OFF, ALLOCSCOPE_TORCH_RECORDER).
void add_notes(Snapshot* snapshot, const Notes& notes, bool merged);

}  // namespace allocscope::capture
