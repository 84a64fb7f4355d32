// Plumbing shared by the PyTorch drop-in verbs (not a verb): "-" reads the snapshot from stdin as PyTorch allows,
// and the flame-graph verbs print folded lines or write an SVG via -o.
#pragma once

#include <string>

#include "allocscope/snapshot.h"
#include "cli_common.h"

namespace allocscope::cli {

// Writes `folded` to stdout, or renders it as an SVG titled `title` into `args`' -o/--output file.
// Returns the exit code (errors are reported on stderr).
int emit_folded(const Args& args, const std::string& folded, const std::string& title);

// Writes `text` to `path` whole; false (with errno set) when it could not.
bool write_text_file(const std::string& path, const std::string& text);

}  // namespace allocscope::cli
