// Reading the calling thread's Python frames without the GIL (see python_frames.h for why), per CPython version.
#include "python_frames.h"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "allocscope/frame_filter.h"
#include "allocscope/pickle.h"

namespace allocscope::capture {
namespace {

// Offsets into the interpreter's structures, x86-64 / aarch64 (LP64), from the version's own headers
// (tests/capture/pyframes/offsets.c printed them: 3.10.13, 3.11.2, 3.11.7, 3.12.1, 3.13.0 here, 3.12.3 on the GPU
// machine). 3.10 keeps a chain of frame objects, one C activation each, its instruction index in code units and the
// PEP 626 line table; 3.11+ keep interpreter frames on a per-thread stack, several per C activation, and the
// location table.
struct Layout {
  int minor = 0;
  size_t tstate_cframe = 0;       // PyThreadState.cframe (3.13: .current_frame; 3.10: .frame)
  size_t cframe_current = 0;      // _PyCFrame.current_frame; kNone when the thread state holds the frame itself
  size_t frame_code = 0;          // _PyInterpreterFrame.f_code (3.13 f_executable; 3.10 PyFrameObject.f_code)
  size_t frame_previous = 0;      // _PyInterpreterFrame.previous (3.10 PyFrameObject.f_back)
  size_t frame_prev_instr = 0;    // _PyInterpreterFrame.prev_instr (3.13 instr_ptr; 3.10 int f_lasti)
  size_t frame_owner = 0;         // _PyInterpreterFrame.owner
  long frame_is_entry = -1;       // 3.11: _PyInterpreterFrame.is_entry (ends one C activation's frames)
  int owned_by_cstack = -1;       // 3.12: owner of the shim frame each C activation pushes first
  size_t code_filename = 0, code_name = 0, code_linetable = 0, code_firstlineno = 0, code_adaptive = 0;
  size_t ascii_size = 0;          // sizeof(PyASCIIObject): where a compact ASCII string's characters start
  size_t compact_size = 0;        // sizeof(PyCompactUnicodeObject): other compact strings
};

constexpr size_t kNone = SIZE_MAX;
constexpr Layout kPython310 = {10, 24, kNone, 32, 24, 96, kNone, -1, -1, 104, 112, 120, 40, 0, 48, 72};
constexpr Layout kPython311 = {11, 56, 8, 32, 48, 56, 69, 68, -1, 112, 120, 136, 72, 184, 48, 72};
constexpr Layout kPython312 = {12, 56, 0, 0, 8, 56, 70, -1, 3, 112, 120, 136, 68, 192, 40, 56};
constexpr Layout kPython313 = {13, 72, kNone, 0, 8, 56, 70, -1, 3, 112, 120, 136, 68, 200, 40, 56};

// Common to 3.11 and 3.12 (LP64): PyObject.ob_type, PyASCIIObject's length and state, PyBytesObject's size and data.
constexpr size_t kObType = 8, kStrLength = 16, kStrState = 32, kBytesSize = 16, kBytesData = 32;

struct Interpreter {
  std::string status = "not looked for";
  Layout layout;
  void* (*this_thread_state)() = nullptr;  // PyGILState_GetThisThreadState
  int (*is_initialized)() = nullptr;       // Py_IsInitialized
  uintptr_t code_type = 0, unicode_type = 0, bytes_type = 0;
  uintptr_t eval_lo = 0, eval_hi = 0;      // _PyEval_EvalFrameDefault's code
};

Interpreter find_interpreter() {
  Interpreter in;
  // Py_GetVersion: "3.12.3 (main, ...)", a static string (Py_Version, the number, is 3.11+ only).
  const auto get_version = reinterpret_cast<const char* (*)()>(dlsym(RTLD_DEFAULT, "Py_GetVersion"));
  if (!get_version) {
    in.status = "no Python interpreter in this process";
    return in;
  }
  // Only CPython's release layouts are known: PyPy's C API layer, and a debug build (whose objects may carry extra
  // header fields), are refused rather than read with the wrong offsets.
  if (std::strstr(get_version(), "PyPy") || !dlsym(RTLD_DEFAULT, "_PyRuntime")) {
    in.status = "not CPython (frames are read from CPython's own structures)";
    return in;
  }
  if (dlsym(RTLD_DEFAULT, "_Py_NegativeRefcount")) {
    in.status = "a debug build of CPython (its object layout is not the release one)";
    return in;
  }
  int major = 0, minor = 0;
  if (std::sscanf(get_version(), "%d.%d", &major, &minor) != 2) major = 0;
  // A free-threaded build ("3.13.0 experimental free-threading build") lays its objects out differently.
  const bool free_threaded = std::strstr(get_version(), "free-threading") != nullptr;
  if (major == 3 && minor == 10) {
    in.layout = kPython310;
  } else if (major == 3 && minor == 11) {
    in.layout = kPython311;
  } else if (major == 3 && minor == 12) {
    in.layout = kPython312;
  } else if (major == 3 && minor == 13 && !free_threaded) {
    in.layout = kPython313;
  } else {
    in.status = "Python " + std::to_string(major) + "." + std::to_string(minor) + (free_threaded ? " free-threaded" : "") +
                " (frames are read for 3.10 to 3.13)";
    return in;
  }
  in.this_thread_state = reinterpret_cast<void* (*)()>(dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState"));
  in.is_initialized = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "Py_IsInitialized"));
  in.code_type = reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, "PyCode_Type"));
  in.unicode_type = reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, "PyUnicode_Type"));
  in.bytes_type = reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, "PyBytes_Type"));
  void* eval = dlsym(RTLD_DEFAULT, "_PyEval_EvalFrameDefault");
  Dl_info info;
  void* extra = nullptr;  // dladdr1 points it at the symbol's ElfW(Sym)
  const auto* sym = static_cast<const ElfW(Sym)*>(nullptr);
  if (eval && dladdr1(eval, &info, &extra, RTLD_DL_SYMENT) && (sym = static_cast<const ElfW(Sym)*>(extra)) &&
      sym->st_size) {
    in.eval_lo = reinterpret_cast<uintptr_t>(eval);
    in.eval_hi = in.eval_lo + sym->st_size;
  }
  if (!in.this_thread_state || !in.is_initialized || !in.code_type || !in.unicode_type || !in.bytes_type) {
    in.status = "Python 3." + std::to_string(minor) + " without the symbols frames are read with";
    in.this_thread_state = nullptr;
    return in;
  }
  in.status = "read from CPython 3." + std::to_string(minor);
  return in;
}

// Never destroyed (as the Session): a dump at exit runs after static destructors would have.
const Interpreter& interpreter() {
  static const Interpreter* in = new Interpreter(find_interpreter());
  return *in;
}

template <typename T>
T read(uintptr_t base, size_t offset) {
  T v;
  std::memcpy(&v, reinterpret_cast<const void*>(base + offset), sizeof v);
  return v;
}

// A str's characters as UTF-8 (compact strings: every str the compiler makes; others read as "?").
std::string read_str(const Interpreter& in, uintptr_t obj) {
  if (!obj || read<uintptr_t>(obj, kObType) != in.unicode_type) return "?";
  const uint32_t state = read<uint32_t>(obj, kStrState);
  const unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
  int64_t length = read<int64_t>(obj, kStrLength);
  if (!compact || length < 0) return "?";
  if (length > 4096) length = 4096;
  const uintptr_t data = obj + (ascii ? in.layout.ascii_size : in.layout.compact_size);
  std::string s;
  s.reserve(static_cast<size_t>(length));
  for (int64_t i = 0; i < length; ++i) {
    uint32_t c;
    if (kind == 1) c = read<uint8_t>(data, i);
    else if (kind == 2) c = read<uint16_t>(data, 2 * i);
    else if (kind == 4) c = read<uint32_t>(data, 4 * i);
    else return "?";
    pickle::append_utf8(c, &s);
  }
  return s;
}

std::string read_bytes(const Interpreter& in, uintptr_t obj) {
  if (!obj || read<uintptr_t>(obj, kObType) != in.bytes_type) return {};
  const int64_t n = read<int64_t>(obj, kBytesSize);
  if (n <= 0 || n > (1 << 20)) return {};
  return std::string(reinterpret_cast<const char*>(obj + kBytesData), static_cast<size_t>(n));
}

// What a code object is, copied the first time it is seen: the object may be gone when the snapshot is written.
struct Code {
  uintptr_t object = 0, key = 0;
  std::string filename, name, linetable;
  int firstlineno = 0;
};

// A code object's identity beyond its address (an address is reused once the object dies): its immutable fields.
uintptr_t code_key(const Layout& l, uintptr_t code) {
  return read<uintptr_t>(code, l.code_filename) ^ (read<uintptr_t>(code, l.code_name) << 1) ^
         (read<uintptr_t>(code, l.code_linetable) << 2) ^ static_cast<uint32_t>(read<int>(code, l.code_firstlineno));
}

// Every code object seen, by id. Never destroyed, for the same reason as interpreter().
struct Codes {
  std::mutex mu;
  std::vector<Code> all;
  std::unordered_map<uintptr_t, uint32_t> of_object;
};
std::atomic<Codes*> g_codes{nullptr};  // set once codes() made it, read by the fork handler (which must not make it)
Codes& codes() {
  static Codes* c = [] {
    auto* made = new Codes;
    g_codes.store(made, std::memory_order_release);
    return made;
  }();
  return *c;
}

uint32_t intern_code(const Interpreter& in, uintptr_t code, uintptr_t key) {
  Codes& cs = codes();
  std::lock_guard<std::mutex> lock(cs.mu);
  auto it = cs.of_object.find(code);
  if (it != cs.of_object.end() && cs.all[it->second].key == key) return it->second;
  const Layout& l = in.layout;
  Code c;
  c.object = code;
  c.key = key;
  c.filename = read_str(in, read<uintptr_t>(code, l.code_filename));
  c.name = read_str(in, read<uintptr_t>(code, l.code_name));
  c.linetable = read_bytes(in, read<uintptr_t>(code, l.code_linetable));
  c.firstlineno = read<int>(code, l.code_firstlineno);
  const auto id = static_cast<uint32_t>(cs.all.size());
  cs.all.push_back(std::move(c));
  cs.of_object[code] = id;
  return id;
}

// Per-thread memo of recent code objects, so an event takes no lock for code it has seen.
struct CacheSlot {
  uintptr_t object = 0, key = 0;
  uint32_t id = 0;
};
thread_local CacheSlot t_cache[512];

uint32_t code_id(const Interpreter& in, uintptr_t code) {
  const uintptr_t key = code_key(in.layout, code);
  CacheSlot& s = t_cache[(code >> 4) & 511];
  if (s.object == code && s.key == key) return s.id;
  s = {code, key, intern_code(in, code, key)};
  return s.id;
}

// One C activation's Python frames, innermost first, as tagged entries.
struct Groups {
  uintptr_t entries[kMaxPythonFrames];
  uint8_t group_end[kMaxPythonFrames];  // 1 after the last frame of an activation
  int n = 0;
};

// 3.10: frame objects, each run by its own C activation; f_lasti counts code units, -1 before the first one.
void read_frames_310(const Interpreter& in, uintptr_t f, Groups* g, uintptr_t skip_code) {
  const Layout& l = in.layout;
  for (int guard = 0; f && g->n < kMaxPythonFrames && guard < 4096; ++guard) {
    const auto code = read<uintptr_t>(f, l.frame_code);
    if (!code || read<uintptr_t>(code, kObType) != in.code_type) break;
    const int lasti = read<int>(f, l.frame_prev_instr);
    if (code == skip_code) {
      f = read<uintptr_t>(f, l.frame_previous);
      continue;
    }
    if (lasti >= 0) {
      g->entries[g->n] = kPythonFrameTag | (uintptr_t(code_id(in, code) & 0x7fffffff) << 32) |
                         static_cast<uint32_t>(lasti * 2);
      g->group_end[g->n] = 1;
      ++g->n;
    }
    f = read<uintptr_t>(f, l.frame_previous);
  }
}

// The innermost frame of a thread state (its current frame), 0 when it runs no Python.
uintptr_t current_frame(const Interpreter& in, uintptr_t tstate) {
  const Layout& l = in.layout;
  uintptr_t f = read<uintptr_t>(tstate, l.tstate_cframe);
  if (f && l.cframe_current != kNone) f = read<uintptr_t>(f, l.cframe_current);  // 3.11, 3.12: via the _PyCFrame
  return f;
}

// The frames of `tstate`, innermost first, without those running `skip_code` (the bootstrap's backward wrapper).
void read_frames(const Interpreter& in, uintptr_t tstate, Groups* g, uintptr_t skip_code = 0) {
  const Layout& l = in.layout;
  if (!tstate) return;
  uintptr_t f = current_frame(in, tstate);
  if (l.minor == 10) return read_frames_310(in, f, g, skip_code);
  for (int guard = 0; f && g->n < kMaxPythonFrames && guard < 4096; ++guard) {
    const auto owner = read<uint8_t>(f, l.frame_owner);
    const auto previous = read<uintptr_t>(f, l.frame_previous);
    if (l.owned_by_cstack >= 0 && owner == l.owned_by_cstack) {  // 3.12: the activation's shim frame
      if (g->n) g->group_end[g->n - 1] = 1;
      f = previous;
      continue;
    }
    const auto code = read<uintptr_t>(f, l.frame_code);
    if (!code || read<uintptr_t>(code, kObType) != in.code_type) break;  // not a frame we understand: stop
    if (code == skip_code) {
      f = previous;
      continue;
    }
    const auto instr = read<uintptr_t>(f, l.frame_prev_instr);
    const uintptr_t first = code + l.code_adaptive;
    if (instr >= first) {  // else the frame has not started running (no line yet)
      const uintptr_t offset = instr - first;
      g->entries[g->n] = kPythonFrameTag | (uintptr_t(code_id(in, code) & 0x7fffffff) << 32) |
                         static_cast<uint32_t>(offset);
      g->group_end[g->n] = 0;
      ++g->n;
    }
    if (l.frame_is_entry >= 0 && read<uint8_t>(f, static_cast<size_t>(l.frame_is_entry)) && g->n)
      g->group_end[g->n - 1] = 1;  // 3.11: the activation's first frame
    f = previous;
  }
  if (g->n) g->group_end[g->n - 1] = 1;
}

// Loans (python_frames_lend_begin): the lender's frames as they were at begin, read once on its own thread, so a
// borrower copies them and never walks another thread's frames (which that thread may push and pop: PyTorch's engine
// runs CPU nodes and Python hooks on the thread that called backward). A few slots, for nested loans (reentrant
// checkpointing calls backward from an engine thread) and threads calling backward at once; the newest active loan
// lends. Each slot is a seqlock: a borrower copies, then checks the slot was not reused meanwhile.
struct Loan {
  std::atomic<uint64_t> seq{0};    // odd while being written or cleared; the loan's order among loans when active
  std::atomic<uint32_t> n{0};      // frames (0: the slot is free)
  std::atomic<uintptr_t> entries[kMaxPythonFrames];
};
constexpr int kLoans = 8;
Loan g_loans[kLoans];
std::atomic<uint64_t> g_loan_order{0};

}  // namespace

const std::string& python_frames_status() { return interpreter().status; }

void python_frames_prepare() {
  (void)interpreter();
  (void)codes();
}

void python_frames_after_fork_in_child() {
  // A thread of the parent may have held the lock at the fork: it does not exist here. Nothing is made or allocated
  // in the fork handler (a registry that does not exist yet has no lock to reset).
  if (Codes* c = g_codes.load(std::memory_order_acquire)) new (&c->mu) std::mutex;
  // Loans belong to the parent's threads, which the child does not have.
  for (Loan& l : g_loans) l.n.store(0, std::memory_order_relaxed);
}


int python_frames_lend_begin() {
  const Interpreter& in = interpreter();
  if (!in.this_thread_state || !in.is_initialized()) return 0;
  const auto tstate = reinterpret_cast<uintptr_t>(in.this_thread_state());
  const uintptr_t f = tstate ? current_frame(in, tstate) : 0;
  if (!f) return 0;
  Groups g;
  // This thread's own frames, without the function that called begin (the bootstrap's wrapper).
  read_frames(in, tstate, &g, read<uintptr_t>(f, in.layout.frame_code));
  if (!g.n) return 0;
  // A lender with no line of the job's own (a DDP communication hook or a checkpointed backward that PyTorch's engine
  // runs, a library's background thread waiting in a collective) has nothing to tell: the loan under way stays the
  // one that lends. The same rule as every answer's site (is_user_frame).
  bool job_line = false;
  for (int i = 0; i < g.n && !job_line; ++i) {
    PythonFrame pf;
    job_line = resolve_python_frame(g.entries[i], &pf) && is_user_frame(pf.name, pf.filename);
  }
  if (!job_line) return 0;
  for (int k = 0; k < kLoans; ++k) {
    Loan& l = g_loans[k];
    uint64_t seq = l.seq.load(std::memory_order_relaxed);
    if ((seq & 1) || l.n.load(std::memory_order_relaxed) != 0) continue;
    if (!l.seq.compare_exchange_strong(seq, seq + 1, std::memory_order_acq_rel)) continue;  // now odd: ours
    for (int i = 0; i < g.n; ++i) l.entries[i].store(g.entries[i], std::memory_order_relaxed);
    l.n.store(static_cast<uint32_t>(g.n), std::memory_order_relaxed);
    // Even again, and larger than every earlier loan's: the newest active loan is the one with the largest seq.
    l.seq.store(2 * (g_loan_order.fetch_add(1, std::memory_order_relaxed) + 1), std::memory_order_release);
    return k + 1;
  }
  return 0;  // more loans at once than slots: those allocations keep native frames only
}

int python_frames_loan(int token, uintptr_t* out, int max) {
  if (token < 1 || token > kLoans || !out) return 0;
  const Loan& l = g_loans[token - 1];  // this thread's own loan: nobody else writes it until its end
  const int n = std::min<int>(static_cast<int>(l.n.load(std::memory_order_relaxed)), std::min(max, kMaxPythonFrames));
  for (int i = 0; i < n; ++i) out[i] = l.entries[i].load(std::memory_order_relaxed);
  return n;
}

void python_frames_lend_end(int token) {
  if (token < 1 || token > kLoans) return;
  Loan& l = g_loans[token - 1];
  const uint64_t seq = l.seq.load(std::memory_order_relaxed);
  l.seq.store(seq | 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  l.n.store(0, std::memory_order_relaxed);
  l.seq.store((seq | 1) + 1, std::memory_order_release);
}

namespace {

// Copies the newest active loan into `g`; false when there is none (or it changed under us twice).
bool borrow(Groups* g) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    int best = -1;
    uint64_t best_seq = 0;
    for (int k = 0; k < kLoans; ++k) {
      const uint64_t seq = g_loans[k].seq.load(std::memory_order_acquire);
      if (!(seq & 1) && g_loans[k].n.load(std::memory_order_relaxed) && seq > best_seq) best = k, best_seq = seq;
    }
    if (best < 0) return false;
    Loan& l = g_loans[best];
    const uint32_t n = std::min<uint32_t>(l.n.load(std::memory_order_relaxed), kMaxPythonFrames);
    for (uint32_t i = 0; i < n; ++i) {
      g->entries[i] = l.entries[i].load(std::memory_order_relaxed);
      g->group_end[i] = 0;
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (l.seq.load(std::memory_order_relaxed) == best_seq && n) {
      g->n = static_cast<int>(n);
      g->group_end[n - 1] = 1;
      return true;
    }
  }
  g->n = 0;
  return false;
}

}  // namespace

int merge_python_frames(const uintptr_t* native, int n, uintptr_t* out, int max) {
  const Interpreter& in = interpreter();
  Groups g;
  if (in.this_thread_state && in.is_initialized()) {
    read_frames(in, reinterpret_cast<uintptr_t>(in.this_thread_state()), &g);
    // A thread that runs no Python (PyTorch's autograd engine) works for the thread that waits in backward(): its
    // frames are stable while it waits, and they say which line of the job this allocation is for.
    if (g.n == 0) borrow(&g);
  }
  int k = 0, next = 0;  // next Python frame to place
  for (int i = 0; i < n && k < max; ++i) {
    const uintptr_t ip = native[i];
    if (next < g.n && ip > in.eval_lo && ip <= in.eval_hi) {  // a return address into the interpreter loop
      do out[k++] = g.entries[next]; while (k < max && !g.group_end[next++]);
      continue;
    }
    out[k++] = ip;
  }
  while (next < g.n && k < max) out[k++] = g.entries[next++];
  return k;
}

bool resolve_python_frame(uintptr_t entry, PythonFrame* out) {
  if (!is_python_frame(entry)) return false;
  const uint32_t id = static_cast<uint32_t>((entry >> 32) & 0x7fffffff);
  Code c;
  {
    Codes& cs = codes();
    std::lock_guard<std::mutex> lock(cs.mu);
    if (id >= cs.all.size()) return false;
    c = cs.all[id];
  }
  out->filename = c.filename;
  out->name = c.name;
  out->line = interpreter().layout.minor == 10 ? python310_line_for(c.linetable, c.firstlineno, static_cast<uint32_t>(entry))
                                              : python_line_for(c.linetable, c.firstlineno, static_cast<uint32_t>(entry));
  return true;
}

// 3.10's line table (PEP 626, Objects/lnotab_notes.txt): pairs of (bytes of code covered, signed line delta), -128
// meaning "no line"; ranges that cover no code still move the line.
int python310_line_for(const std::string& table, int firstlineno, uint32_t byte_offset) {
  int line = firstlineno, current = -1;
  uint32_t start = 0, end = 0;
  for (size_t i = 0; i + 1 < table.size(); i += 2) {
    start = end;
    end += static_cast<uint8_t>(table[i]);
    const auto delta = static_cast<int8_t>(table[i + 1]);
    if (delta == -128) {
      current = -1;
    } else {
      line += delta;
      current = line;
    }
    if (start < end && byte_offset >= start && byte_offset < end) return current;
  }
  return -1;
}

// The location table (Objects/locations.md in CPython): entries of one first byte (bit 7 set, a 4-bit code, the
// number of code units it covers minus one) and the code's extra bytes; the code says how the line moves.
int python_line_for(const std::string& table, int firstlineno, uint32_t byte_offset) {
  const auto* p = reinterpret_cast<const uint8_t*>(table.data());
  const size_t size = table.size();
  const uint32_t target = byte_offset / 2;  // in code units (_Py_CODEUNIT: 2 bytes)
  auto varint = [&](size_t at) {
    uint32_t read = at < size ? p[at] : 0, val = read & 63, shift = 0;
    while ((read & 64) && ++at < size && shift < 28) {
      read = p[at];
      shift += 6;
      val |= (read & 63) << shift;
    }
    return val;
  };
  int line = firstlineno;
  uint32_t addr = 0;
  for (size_t i = 0; i < size;) {
    const uint8_t b = p[i];
    if (!(b & 0x80)) return -1;  // not the start of an entry: a table we do not understand
    const int code = (b >> 3) & 15;
    int delta = 0;
    if (code == 13 || code == 14) {
      const uint32_t u = varint(i + 1);
      delta = (u & 1) ? -static_cast<int>(u >> 1) : static_cast<int>(u >> 1);
    } else if (code >= 10 && code <= 12) {
      delta = code - 10;
    }
    line += delta;
    const uint32_t len = (b & 7) + 1u;
    if (target < addr + len) return code == 15 ? -1 : line;
    addr += len;
    do ++i; while (i < size && !(p[i] & 0x80));
  }
  return -1;
}

}  // namespace allocscope::capture
