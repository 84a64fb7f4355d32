// PyTorch's trace_plot / segment_plot pages, and the files that are known not to be snapshots (page.h).
#include "snapshot/page.h"

#include "allocscope/loader.h"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace allocscope::detail {

namespace {

// Offset of the first byte that is not a space (or a UTF-8 byte order mark at the start).
size_t first_content(std::span<const uint8_t> head) {
  size_t i = 0;
  if (head.size() >= 3 && head[0] == 0xef && head[1] == 0xbb && head[2] == 0xbf) i = 3;
  while (i < head.size() && (head[i] == ' ' || head[i] == '\t' || head[i] == '\r' || head[i] == '\n')) ++i;
  return i;
}

// RFC 4648 base64 as Python's base64.b64encode writes it: no spaces or line breaks, '=' only as the last padding.
Result<std::vector<uint8_t>> from_base64(std::string_view text, uint64_t at) {
  static const std::array<int8_t, 256> value = [] {
    std::array<int8_t, 256> v;
    v.fill(-1);
    const std::string_view digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t k = 0; k < digits.size(); ++k) v[static_cast<uint8_t>(digits[k])] = static_cast<int8_t>(k);
    return v;
  }();
  if (text.size() % 4 != 0)
    return Error{"the page's snapshot is not whole base64 (" + std::to_string(text.size()) + " characters)", at};
  std::vector<uint8_t> out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    uint32_t v = 0;
    int pad = 0;
    for (size_t k = 0; k < 4; ++k) {
      const uint8_t c = static_cast<uint8_t>(text[i + k]);
      const bool last = i + 4 == text.size();
      if (c == '=' && last && k >= 2 && (k == 3 || text[i + 3] == '=')) {
        ++pad;
        v <<= 6;
        continue;
      }
      if (value[c] < 0 || pad)
        return Error{"the page's snapshot has a character that is not base64 at character " + std::to_string(i + k),
                     at};
      v = (v << 6) | static_cast<uint32_t>(value[c]);
    }
    out.push_back(static_cast<uint8_t>(v >> 16));
    if (pad < 2) out.push_back(static_cast<uint8_t>(v >> 8));
    if (pad < 1) out.push_back(static_cast<uint8_t>(v));
  }
  return out;
}

}  // namespace

PageStart page_start(std::span<const uint8_t> head) {
  static constexpr uint8_t kMark[] = {0xef, 0xbb, 0xbf};
  if (head.size() < 3 && std::equal(head.begin(), head.end(), kMark)) return PageStart::kUndecided;
  const size_t i = first_content(head);
  if (i >= kPageStartLimit) return PageStart::kNotPage;
  if (i >= head.size()) return PageStart::kUndecided;
  return head[i] == '<' ? PageStart::kPage : PageStart::kNotPage;
}

Result<std::vector<uint8_t>> snapshot_in_page(std::span<const uint8_t> page) {
  const std::string_view text(reinterpret_cast<const char*>(page.data()), page.size());
  // _memory_viz's template: `const local_files = [{"name": "snapshot.pickle", "base64": "..."}]` on one line
  // (json.dumps), then `add_local_files(local_files, ...)` on the next.
  constexpr std::string_view kMarker = "const local_files = ";
  const size_t marker = text.find(kMarker);
  if (marker == std::string_view::npos)
    return Error{"an HTML page, but not one of PyTorch's trace_plot or segment_plot pages (those carry the snapshot as "
                 "'const local_files = [...]'): open the snapshot's .pickle file itself",
                 0};
  const size_t start = marker + kMarker.size();
  size_t end = text.find('\n', start);
  if (end == std::string_view::npos) end = text.size();
  const nlohmann::json files = nlohmann::json::parse(text.begin() + static_cast<std::ptrdiff_t>(start),
                                                     text.begin() + static_cast<std::ptrdiff_t>(end), nullptr,
                                                     /*allow_exceptions=*/false);
  if (files.is_discarded() || !files.is_array() || files.empty() || !files[0].is_object() ||
      !files[0].contains("base64") || !files[0]["base64"].is_string())
    return Error{"a trace_plot / segment_plot page whose 'local_files' is not a list of {\"name\", \"base64\"} files",
                 start};
  if (files.size() > 1)
    return Error{"a page that carries " + std::to_string(files.size()) +
                     " snapshots: allocscope opens a page that carries one (as trace_plot and segment_plot write)",
                 start};
  return from_base64(files[0]["base64"].get_ref<const std::string&>(), start);
}

Status refuse_known_non_snapshots(std::span<const uint8_t> head) {
  if (head.size() >= 4 && head[0] == 'P' && head[1] == 'K' && head[2] == 3 && head[3] == 4)
    return Error{"a zip archive (torch.save writes these), not a pickled snapshot: save the snapshot with "
                 "torch.cuda.memory._dump_snapshot(PATH), or pickle.dump(torch.cuda.memory._snapshot(), f)",
                 0};
  // JSON may be a snapshot (json.dump of torch.cuda.memory._snapshot(), or of the oldest format's list of segments):
  // it is read, and a profiler trace or a timeline export is told apart by what it holds.
  return {};
}

bool starts_as_json(std::span<const uint8_t> head) {
  const size_t i = first_content(head);
  return i < head.size() && (head[i] == '{' || head[i] == '[');
}

}  // namespace allocscope::detail

namespace allocscope {

bool is_json_snapshot(std::span<const uint8_t> head) {
  if (!detail::starts_as_json(head)) return false;
  if (head[detail::first_content(head)] == '[') return true;  // the oldest format: a list of segments
  size_t i = detail::first_content(head) + 1;
  while (i < head.size() && (head[i] == ' ' || head[i] == '\t' || head[i] == '\r' || head[i] == '\n')) ++i;
  if (i >= head.size() || head[i] != '"') return false;
  const size_t end = std::min(head.size(), i + 1 + 32);
  size_t j = i + 1;
  while (j < end && head[j] != '"') ++j;
  if (j >= end) return false;
  const std::string_view key(reinterpret_cast<const char*>(head.data()) + i + 1, j - i - 1);
  for (std::string_view k : {"segments", "device_traces", "allocator_settings", "external_annotations",
                             "host_segments", "host_traces"})
    if (key == k) return true;
  return false;
}

}  // namespace allocscope

namespace allocscope::detail {

namespace {

// Printable ASCII, tabs and line breaks, and any byte of a UTF-8 sequence; no other control byte. A binary pickle
// (protocols 1-5) holds control bytes within its first few: PROTO's 0x80 first, lengths and small ints after.
bool looks_like_text(std::span<const uint8_t> head) {
  // Short input, and protocol 0's text opcodes with their argument ("I999...", "g-1", "(" alone), stay a pickle's
  // error: text starts with a word (two letters) or has a space or a comma on its first line.
  if (head.size() < 8 || head[0] >= 0x80) return false;
  const auto letter = [](uint8_t c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; };
  bool word = letter(head[0]) && letter(head[1]);
  for (size_t i = 0; i < head.size() && head[i] != '\n' && !word; ++i) word = head[i] == ' ' || head[i] == ',';
  if (!word) return false;
  // A protocol 0 pickle of a snapshot (a dict or a list) is text too: '(dp0' or '(lp0'. Its error is a pickle's.
  if (head.size() >= 2 && head[0] == '(' && (head[1] == 'd' || head[1] == 'l')) return false;
  for (uint8_t c : head)
    if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') return false;
  return true;
}

// The first line, cut to 48 characters, with anything but printable ASCII as '?': it is quoted in an error.
std::string first_line(std::span<const uint8_t> head) {
  std::string out;
  for (uint8_t c : head) {
    if (c == '\n' || c == '\r' || out.size() >= 48) break;
    out += c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?';
  }
  return out;
}

}  // namespace

Error explain_text(std::span<const uint8_t> head, const Error& parse_error) {
  head = head.first(std::min(head.size(), kTextHead));
  if (!looks_like_text(head)) return parse_error;
  const std::string line = first_line(head);
  // CSV: two lines (at least) with the same number of commas, one or more.
  auto commas = [](std::string_view l) { return static_cast<size_t>(std::count(l.begin(), l.end(), ',')); };
  const std::string_view text(reinterpret_cast<const char*>(head.data()), head.size());
  const size_t nl = text.find('\n');
  const std::string_view second = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
  const std::string_view second_line = second.substr(0, std::min(second.find('\n'), second.size()));
  const bool csv = commas(line) > 0 && commas(line) == commas(second_line);
  const std::string kind = csv ? "CSV text" : "a text file";
  return Error{kind + ", not a pickle: it begins \"" + line + (line.size() >= 48 ? "...\"" : "\"") +
                   ". allocscope reads the snapshot torch.cuda.memory._dump_snapshot(PATH) writes (a .pickle, or "
                   "a .pickle.gz)",
               0};
}

}  // namespace allocscope::detail
