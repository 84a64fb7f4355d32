// A small HTTP/1.1 server bound to 127.0.0.1 for `allocscope view`: GET/HEAD of files, and POST of a small body for
// `view --native`'s method calls; one thread per connection, kept alive between requests (HTTP/1.1). See docs/viewer.md for why not
// cpp-httplib.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace allocscope::cli {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;       // sent when file is empty
  std::string file;       // a path to stream instead of body
  std::vector<std::pair<std::string, std::string>> headers;
};

struct HttpRequest {
  std::string method;  // GET, HEAD or POST
  std::string path;    // percent-decoded, without the query string
  std::string query;   // raw
  std::string body;    // POST only, at most kMaxHttpBody bytes
};
constexpr size_t kMaxHttpBody = 64u << 20;  // a search's frame ids on a 100M-event file
using HttpHandler = std::function<HttpResponse(const HttpRequest& request)>;

class HttpServer {
 public:
  ~HttpServer();
  // Binds 127.0.0.1:port (0 = any free port). Returns false with *why on failure.
  bool listen(uint16_t port, std::string* why);
  uint16_t port() const { return port_; }
  // Accepts until `stop` becomes true (checked every 200 ms).
  void serve(const HttpHandler& handler, const std::atomic<bool>& stop);
  // Requests still being answered (each on its connection's thread, which uses the handler); idle kept-alive
  // connections are not counted.
  int busy() const { return active_.load(); }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<int> open_{0};    // connections, each with its thread
  std::atomic<int> active_{0};  // of those, the ones in the middle of a request
};

// Percent-decoding of a URL path; false on a malformed escape.
bool url_decode(const std::string& in, std::string* out);
std::string url_encode_component(const std::string& in);

}  // namespace allocscope::cli
