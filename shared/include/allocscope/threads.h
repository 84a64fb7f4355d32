// Threads: allocscope's loads and analyses use the cores this process may run on (ALLOCSCOPE_THREADS=N caps them).
#pragma once

namespace allocscope {

// The cores this process may run on, at least 1: the CPUs of its affinity mask (`taskset`, a Slurm allocation, a
// container's cpuset), capped by a cgroup v2 CPU quota (`docker --cpus`, a Kubernetes limit), rounded up. Not the
// machine's count: a job given 4 CPUs of a 128-core node that started 128 workers would hold 128 snapshots at once
// on 4 CPUs. Counted once per process. 1 in WebAssembly.
unsigned usable_cores();

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
