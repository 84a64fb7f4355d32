// What a capture says it could not see (its 'notes', written by native/capture/src/notes.cpp), as load warnings, so
// that `summary`, the viewer and every answer that lists the file's warnings say it too.
#pragma once

#include "allocscope/snapshot.h"

namespace allocscope::detail {

// Adds one warning per note of `s`'s capture settings (and of its outside part's, but for "torch_recorder" there: a
// merged file has PyTorch's part). A capture without PyTorch's part says what that leaves out.
void note_capture_notes(Snapshot* s);

}  // namespace allocscope::detail
