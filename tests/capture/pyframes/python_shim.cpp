// Test-only: lets a Python process drive the capture core through ctypes, so python_frames_test.py can compare the
// Python frames the recorder reads from the interpreter with Python's own traceback, with the GIL released (ctypes.CDLL)
// and held (ctypes.PyDLL). The hook is the same Recorder::on_alloc the CUDA front-end calls.
#include <cstdint>
#include <thread>

#include "allocscope_capture.h"
#include "python_frames.h"
#include "session.h"

using namespace allocscope::capture;

extern "C" {

__attribute__((visibility("default"))) int shim_start(const char* path, int stacks, int max_frames, int dump_at_exit) {
  allocscope_capture_options o;
  allocscope_capture_default_options(&o);
  o.output_path = path;
  o.stacks = stacks;
  o.max_frames = max_frames;
  o.dump_at_exit = dump_at_exit;
  return allocscope_capture_start(&o);
}

__attribute__((visibility("default"), noinline)) void shim_alloc(uint64_t addr, uint64_t size) {
  if (Recorder* r = Session::get().recorder()) {
    Site s;
    s.api = Api::kMemAlloc;
    r->on_alloc(s, addr, size, SegmentKind::kPlain, 0);
  }
}

// The same hook from a thread that never ran Python (as PyTorch's autograd engine threads allocate gradients).
__attribute__((visibility("default"))) void shim_alloc_on_native_thread(uint64_t addr, uint64_t size) {
  std::thread([=] { shim_alloc(addr, size); }).join();
}

__attribute__((visibility("default"))) int shim_lend_begin() { return allocscope_capture_python_lend_begin(); }
__attribute__((visibility("default"))) void shim_lend_end(int token) { allocscope_capture_python_lend_end(token); }

// As the bootstrap lends (sitecustomize.py): a named loan, kept by the capture as a time window.
__attribute__((visibility("default"))) int shim_lend_begin_for(const char* call) {
  return allocscope_capture_python_lend_begin_for(call);
}

// As the bootstrap merges PyTorch's snapshot at exit.
__attribute__((visibility("default"))) int shim_dump_merged(const char* pytorch_snapshot, int final) {
  return allocscope_capture_dump_merged(pytorch_snapshot, final);
}

__attribute__((visibility("default"))) const char* shim_last_error() { return allocscope_capture_last_error(); }

__attribute__((visibility("default"))) int shim_stop() { return allocscope_capture_stop(); }

__attribute__((visibility("default"))) int shim_dump_and_stop() {
  const int rc = allocscope_capture_dump(nullptr);
  allocscope_capture_stop();
  return rc;
}

__attribute__((visibility("default"))) const char* shim_python_status() { return python_frames_status().c_str(); }

}  // extern "C"
