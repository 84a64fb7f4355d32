// Threads: allocscope's loads and analyses use the machine's cores on their own (ALLOCSCOPE_THREADS=N caps them).
#pragma once

namespace allocscope {

// While one lives, every load and analysis called on its thread runs on that thread alone: no inflater, reader or
// decode-ahead thread, no analysis split across cores. For callers that already keep every core busy with one piece
// of work each (`ranks`' workers, one snapshot per worker), where threads of each piece's own would only take turns
// with the other pieces on the same cores.
class SingleThreaded {
 public:
  explicit SingleThreaded(bool on = true);
  ~SingleThreaded();
  SingleThreaded(const SingleThreaded&) = delete;
  SingleThreaded& operator=(const SingleThreaded&) = delete;

 private:
  bool was_;
};

}  // namespace allocscope
