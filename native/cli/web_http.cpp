// Loopback HTTP server for the viewer: parses the request line, maps it through a handler, streams files.
#include "web_http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <system_error>
#include <thread>

namespace allocscope::cli {

namespace {

constexpr int kMaxConnections = 64;

const char* reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Payload Too Large";
    default: return "Error";
  }
}

bool send_all(int fd, const char* p, size_t n) {
  while (n) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// A request header's value (`name` lower-case, with its colon), lower-cased; "" when it has none.
std::string header_of(const std::string& req, const std::string& name) {
  for (size_t at = req.find("\r\n"); at != std::string::npos && at + 2 < req.size(); at = req.find("\r\n", at + 2)) {
    const size_t line = at + 2, end = req.find("\r\n", line);
    if (end == std::string::npos || end == line) break;
    std::string h = req.substr(line, end - line);
    for (char& c : h) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (h.rfind(name, 0) != 0) continue;
    const size_t b = h.find_first_not_of(" \t", name.size()), e = h.find_last_not_of(" \t");
    return b == std::string::npos ? "" : h.substr(b, e - b + 1);
  }
  return "";
}

// One request and its answer on a connection; `pending` holds what was read past the previous request. Returns
// whether the connection may carry another (HTTP/1.1 keep-alive: a page's draw calls then skip a new connection each,
// 5 ms at the median in Chromium on a 2-core machine).
bool serve_one(int fd, const HttpHandler& handler, uint16_t port, std::string* pending, std::atomic<int>* active) {
  // A request must arrive whole within 10 s of its first byte (a client sending a byte every few seconds would
  // otherwise hold its thread for ever), and a client that stops reading the answer is dropped after 30 s without
  // progress.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::string req = std::move(*pending);
  pending->clear();
  char buf[4096];
  while (req.find("\r\n\r\n") == std::string::npos && req.size() < 16384) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    ssize_t r = ::recv(fd, buf, sizeof buf, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    req.append(buf, static_cast<size_t>(r));
  }
  struct Active {  // busy() counts connections in the middle of a request, not idle ones
    std::atomic<int>* n;
    explicit Active(std::atomic<int>* a) : n(a) { ++*n; }
    ~Active() { --*n; }
  } in_request(active);
  const size_t head_end = req.find("\r\n\r\n");
  // Bound to 127.0.0.1, but a web page can still reach it through a name that resolves there (DNS rebinding): its
  // requests carry that name as Host. Only the names of this machine's loopback are answered.
  const std::string host = header_of(req, "host:"), p = ":" + std::to_string(port);
  const bool host_ok = host.empty() || host == "127.0.0.1" + p || host == "localhost" + p;
  HttpResponse res;
  const size_t sp1 = req.find(' '), sp2 = sp1 == std::string::npos ? sp1 : req.find(' ', sp1 + 1);
  const size_t eol = req.find("\r\n");
  const std::string method = sp1 == std::string::npos ? "" : req.substr(0, sp1);
  std::string target = sp2 == std::string::npos ? "" : req.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string version = sp2 == std::string::npos || eol == std::string::npos || eol < sp2 ? ""
                                                                                                 : req.substr(sp2 + 1, eol - sp2 - 1);
  // Another request may follow on this connection only when this one's end is known: a whole head, and a body of
  // its Content-Length (a GET or HEAD has none here).
  bool keep = head_end != std::string::npos && version == "HTTP/1.1" && header_of(req, "connection:") != "close";
  std::string query;
  if (auto q = target.find('?'); q != std::string::npos) query = target.substr(q + 1), target.resize(q);
  std::string path;
  // A POST's body: what came after the head, then the rest of Content-Length (bounded; same deadline).
  std::string body;
  bool body_ok = true;
  if (method == "POST") {
    const std::string cl = header_of(req, "content-length:");
    char* end = nullptr;
    const unsigned long long want = cl.empty() ? 0 : std::strtoull(cl.c_str(), &end, 10);
    body_ok = head_end != std::string::npos && !cl.empty() && end && !*end && want <= kMaxHttpBody;
    if (body_ok) {
      body = req.substr(head_end + 4);
      while (body.size() < want) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        ssize_t r = ::recv(fd, buf, sizeof buf, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        body.append(buf, static_cast<size_t>(r));
      }
      *pending = body.substr(want);
      body.resize(want);
    } else {
      keep = false;
    }
  } else if (head_end != std::string::npos) {
    if (!header_of(req, "content-length:").empty() || !header_of(req, "transfer-encoding:").empty()) keep = false;
    *pending = req.substr(head_end + 4);
  }
  if (method != "GET" && method != "HEAD" && method != "POST") {
    res.status = 405;
    res.body = "only GET, HEAD and POST\n";
  } else if (!body_ok) {
    res.status = 413;
    res.body = "a POST needs a Content-Length of at most 64 MiB\n";
  } else if (!host_ok) {
    res.status = 403;
    res.body = "this server answers only http://127.0.0.1" + p + "/\n";
  } else if (target.empty() || target[0] != '/' || !url_decode(target, &path)) {
    res.status = 400;
    res.body = "bad request\n";
  } else {
    res = handler(HttpRequest{method, path, query, std::move(body)});
  }
  // After an answer that says the request could not be read, where the next one starts is not known.
  if (res.status == 400 || res.status == 405 || res.status == 413) keep = false;
  int file_fd = -1;
  uint64_t length = res.body.size();
  if (res.status == 200 && !res.file.empty()) {
    file_fd = ::open(res.file.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st{};
    if (file_fd < 0 || ::fstat(file_fd, &st) != 0) {
      if (file_fd >= 0) ::close(file_fd);
      file_fd = -1;
      res.status = 404;
      res.content_type = "text/plain; charset=utf-8";
      res.body = "not found\n";
      length = res.body.size();
    } else {
      length = static_cast<uint64_t>(st.st_size);
    }
  }
  std::string head = "HTTP/1.1 " + std::to_string(res.status) + " " + reason(res.status) + "\r\n" +
                     "Content-Type: " + res.content_type + "\r\nContent-Length: " + std::to_string(length) +
                     "\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"
                     "Referrer-Policy: no-referrer\r\nConnection: " + (keep ? "keep-alive" : "close") + "\r\n";
  for (const auto& [k, v] : res.headers) head += k + ": " + v + "\r\n";
  head += "\r\n";
  // The head and a body held in memory leave in one send, and nothing waits for an ACK (Nagle): an answer is one
  // write, and the page waits on its last byte.
  if (file_fd < 0) {
    if (method != "HEAD") head += res.body;
    return send_all(fd, head.data(), head.size()) && keep;
  }
  bool ok = send_all(fd, head.data(), head.size());
  if (ok && method != "HEAD") {
    std::string chunk(1 << 20, '\0');
    uint64_t sent = 0;
    while (ok && sent < length) {
      ssize_t r = ::read(file_fd, chunk.data(), static_cast<size_t>(std::min<uint64_t>(chunk.size(), length - sent)));
      if (r < 0 && errno == EINTR) continue;
      ok = r > 0 && send_all(fd, chunk.data(), static_cast<size_t>(r));
      if (ok) sent += static_cast<uint64_t>(r);
    }
  }
  ::close(file_fd);
  return ok && keep;
}

// A connection: requests one after another while the client keeps it open, each begun within 5 s of the answer
// before (Chromium keeps idle connections longer and opens a new one when this one has closed), until `stop`.
void handle(int fd, const HttpHandler& handler, uint16_t port, std::atomic<int>* active, const std::atomic<bool>& stop) {
  timeval rcv{10, 0}, snd{30, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &rcv, sizeof rcv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &snd, sizeof snd);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  std::string pending;
  for (int served = 0; served < 10000; ++served) {
    if (served > 0 && pending.empty()) {
      int waited = 0;
      for (;;) {
        pollfd pf{fd, POLLIN, 0};
        const int r = ::poll(&pf, 1, 200);
        if (r > 0 || (r < 0 && errno != EINTR)) break;
        if (stop.load() || (waited += 200) >= 5000) return;
      }
    }
    if (!serve_one(fd, handler, port, &pending, active)) return;
  }
}

}  // namespace

bool url_decode(const std::string& in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size() || !std::isxdigit(static_cast<unsigned char>(in[i + 1])) ||
        !std::isxdigit(static_cast<unsigned char>(in[i + 2])))
      return false;
    out->push_back(static_cast<char>(std::stoi(in.substr(i + 1, 2), nullptr, 16)));
    i += 2;
  }
  return out->find('\0') == std::string::npos;
}

std::string url_encode_component(const std::string& in) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : in) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') out.push_back(static_cast<char>(c));
    else out += {'%', hex[c >> 4], hex[c & 15]};
  }
  return out;
}

HttpServer::~HttpServer() {
  if (fd_ >= 0) ::close(fd_);
}

bool HttpServer::listen(uint16_t port, std::string* why) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return *why = std::string("socket: ") + std::strerror(errno), false;
  int one = 1;
  ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);  // never reachable from another machine
  addr.sin_port = htons(port);
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd_, 64) != 0) {
    *why = "cannot listen on 127.0.0.1:" + std::to_string(port) + ": " + std::strerror(errno);
    ::close(fd_);
    fd_ = -1;
    return false;
  }
  socklen_t len = sizeof addr;
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  return true;
}

void HttpServer::serve(const HttpHandler& handler, const std::atomic<bool>& stop) {
  while (!stop.load()) {
    pollfd p{fd_, POLLIN, 0};
    int r = ::poll(&p, 1, 200);
    if (r <= 0) continue;
    int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    // At most kMaxConnections at once: more are closed at once rather than each holding a thread and a buffer.
    std::atomic<int>& open = open_;
    if (open.load() >= kMaxConnections) {
      ::close(c);
      continue;
    }
    // A connection that cannot get a thread, or whose answer runs out of memory, is closed; the server goes on
    // (an exception leaving a thread, or std::thread's constructor here, would end the process).
    try {
      ++open;
      std::atomic<int>& active = active_;
      std::thread([c, &handler, &open, &active, &stop, port = port_] {
        try {
          handle(c, handler, port, &active, stop);
        } catch (const std::exception&) {
        }
        ::close(c);
        --open;
      }).detach();
    } catch (const std::exception&) {
      --open;
      ::close(c);
    }
  }
}

}  // namespace allocscope::cli
