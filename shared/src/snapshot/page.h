// Files that are not a snapshot pickle, told apart by their first bytes: PyTorch's trace_plot and segment_plot pages,
// which carry the snapshot they draw and open as it, JSON snapshots, and torch.save's zip, which users open by
// mistake, refused with what to do instead of a pickle opcode error.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "allocscope/result.h"

namespace allocscope::detail {

// How a file's first bytes start: '<' after spaces and a UTF-8 byte order mark is an HTML page (no pickle starts so:
// none of these is an opcode). Undecided while `head` holds only spaces (or part of the mark), up to
// kPageStartLimit bytes: past that it is not a page, so a stream of spaces is never held whole.
enum class PageStart { kUndecided, kPage, kNotPage };
constexpr size_t kPageStartLimit = 64u << 10;
PageStart page_start(std::span<const uint8_t> head);
inline bool starts_as_page(std::span<const uint8_t> head) { return page_start(head) == PageStart::kPage; }

// The snapshot a page written by PyTorch's trace_plot or segment_plot carries (`_memory_viz._format_viz`): the
// pickle, padded with zero bytes to a multiple of 3 (they follow its STOP and are never read). Errors name the byte
// offset in the page.
Result<std::vector<uint8_t>> snapshot_in_page(std::span<const uint8_t> page);

// '{' or '[' after spaces and a UTF-8 byte order mark: a JSON snapshot (json_snapshot.h), opened as its pickle
// would be (the oldest format is a list of segments).
bool starts_as_json(std::span<const uint8_t> head);

// A zip archive (torch.save), refused with what to do; ok for anything else.
Status refuse_known_non_snapshots(std::span<const uint8_t> head);

// The error to show for `parse_error`, which the pickle machine raised on a file beginning with `head`: when the
// file is text (a CSV, a log, source code), that it is text and how it begins, since most text bytes are pickle
// opcodes too ('h' is BINGET) and their error would talk about memo slots. Otherwise `parse_error` itself. Only
// asked after a failure, so protocol 0 pickles (text too) still load.
Error explain_text(std::span<const uint8_t> head, const Error& parse_error);
constexpr size_t kTextHead = 512;  // how much of the start explain_text looks at

}  // namespace allocscope::detail
