// Python frames of the calling thread, read from CPython's own structures (3.10 to 3.13) without taking the GIL, and
// merged into the native stack where the interpreter's frames are, so an allocation's stack says which line of the
// job's Python code made it.
//
// Why not the C API: the hooks run inside the driver call, often with the GIL released (PyTorch releases it around
// every op) and under the caller's locks (PyTorch's caching allocator holds its mutex while it calls cudaMalloc), so
// taking the GIL could deadlock against a thread that holds the GIL and waits for that mutex. A thread's own frames
// cannot change while it is inside a call, so reading them is safe without the GIL; the layouts come from the
// interpreter's headers (tests/capture/pyframes/offsets.c prints them) and are checked end to end by
// tests/capture/pyframes/python_frames_test.py against Python's own traceback.
#pragma once

#include <cstdint>
#include <string>

namespace allocscope::capture {

// A stack entry that is a Python frame rather than a return address: bit 63 (never set in a user-space address), the
// code object's id in bits 32..62 and the byte offset of the instruction executing in bits 0..31.
constexpr uintptr_t kPythonFrameTag = uintptr_t(1) << 63;
inline bool is_python_frame(uintptr_t entry) { return (entry & kPythonFrameTag) != 0; }

// Most Python frames kept per event (outermost dropped first).
constexpr int kMaxPythonFrames = 64;

// Finds a supported CPython in this process (once; cheap after the first call): "read from CPython 3.12" when one was
// found, else why frames are not read ("no Python interpreter in this process", "Python 3.13 (...)").
const std::string& python_frames_status();

// Looks the interpreter up and makes the code registry now (the recorder's start, which a fork cannot interrupt):
// a first use inside a hook could be under way on another thread when the process forks, and the child would then
// wait forever on that one-time initialisation.
void python_frames_prepare();

// In a forked child: the code registry's lock may have been held by a parent's thread that the child does not have.
void python_frames_after_fork_in_child();

// Writes the native return addresses `native[0..n)` (innermost first) to `out` with the calling thread's Python frames
// in place of each interpreter loop activation (_PyEval_EvalFrameDefault) that ran them; Python frames the native
// stack did not reach (it was cut at max frames) follow the native ones. At most `max` entries; returns the count.
// Without a Python interpreter, or on a thread that never ran Python, copies the native stack. Allocates only the first
// time it sees a code object.
int merge_python_frames(const uintptr_t* native, int n, uintptr_t* out, int max);

// Lending frames: called on a Python thread right before it waits for work that threads running no Python do for it
// (PyTorch's autograd engine runs backward on its own threads), and right after. In between, an allocation on a
// thread with no Python frames gets the lender's frames as they were at begin, without the frames of the function
// that called begin (the bootstrap's wrapper around PyTorch's own function). The frames are read once, on the
// lender's own thread: no other thread ever reads its frames. Up to 8 loans at once (nested backward calls, several
// threads); the newest one lends. A lender none of whose frames is the job's own (all library code, by
// is_user_frame) lends nothing. begin returns a token for end (0: nothing lent).
int python_frames_lend_begin();
void python_frames_lend_end(int token);
// The frames loan `token` lends (entries as in a stack, innermost first), at most `max`: its window's stack in the
// capture (Recorder::on_lend_begin). Call on the lender's thread, between its begin and end. Returns the count.
int python_frames_loan(int token, uintptr_t* out, int max);

// A Python frame entry's file, function and line (what PyTorch's recorder writes). False for a native entry.
struct PythonFrame {
  std::string filename;
  std::string name;
  int line = 0;
};
bool resolve_python_frame(uintptr_t entry, PythonFrame* out);

// The line of the instruction at `byte_offset` in a code object whose location table (co_linetable, the 3.11+
// format) and first line are given; -1 when the table gives it no line. Exposed for tests.
int python_line_for(const std::string& linetable, int firstlineno, uint32_t byte_offset);
// The same for 3.10's line table (PEP 626).
int python310_line_for(const std::string& linetable, int firstlineno, uint32_t byte_offset);

}  // namespace allocscope::capture
