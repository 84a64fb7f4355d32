// `allocscope view`'s native backend: for a file too big for a browser tab (WebAssembly's heap ends at 4 GB), the
// page asks this process to load it and to run the view methods, as Perfetto's UI asks trace_processor_shell. The
// methods are the wasm bridge's own (wasm/methods.h), so every view gets the same answers either way.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "allocscope/snapshot.h"
#include "web_http.h"

namespace allocscope::cli {

// A served file that a browser tab cannot hold: its pickle (inflated) is estimated above `limit` bytes (the model
// needs ~0.9x it in the tab's heap, and a tab may be given much less than 4 GB).
bool too_big_for_a_tab(const std::string& path, uint64_t limit);
constexpr uint64_t kTabPickleLimit = 2ull << 30;

class NativeBackend {
 public:
  // `window`: each file loads only that window of its devices' traces (`view --from/--to`; whole by default).
  explicit NativeBackend(std::vector<std::string> files, TraceWindow window = {});
  ~NativeBackend();
  // Answers api/open, api/progress and api/call (paths after the URL's secret); nullopt for any other path.
  //   POST api/open?file=I   loads served file I (once) -> {"ids": [...], "infos": [...]} as the worker's open
  //   GET  api/progress?file=I  -> {"phase", "done", "total"} of that load
  //   POST api/call  (body: the request JSON) -> u32 length of the answer's JSON text (little-endian), the text,
  //                  zeros to a multiple of 8, then its blobs at the offsets the text's "_blobs" gives
  std::optional<HttpResponse> answer(const HttpRequest& request);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace allocscope::cli
