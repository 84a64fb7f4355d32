/* The capture library's C ABI: start, dump and stop recording CUDA memory events; name ranges of a job's work. */
#ifndef ALLOCSCOPE_CAPTURE_H_
#define ALLOCSCOPE_CAPTURE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* PYTHON: native frames plus the Python frames (file, line, function) of a CPython 3.10 to 3.13 in the process. */
enum allocscope_capture_stacks { ALLOCSCOPE_STACKS_NONE = 0, ALLOCSCOPE_STACKS_NATIVE = 1, ALLOCSCOPE_STACKS_PYTHON = 2 };

/* Zero or negative fields mean "take the environment's value, else the default" (see docs/capture.md). */
typedef struct allocscope_capture_options {
  uint32_t struct_size;    /* sizeof(allocscope_capture_options): lets the struct grow */
  const char* output_path; /* ".pickle" or ".pickle.gz"; "%p" becomes the process id; NULL: ALLOCSCOPE_OUTPUT */
  uint64_t max_entries;    /* ring buffer of trace entries; 0: ALLOCSCOPE_MAX_ENTRIES or 100000 */
  int32_t stacks;          /* allocscope_capture_stacks; -1: ALLOCSCOPE_STACKS or python */
  int32_t max_frames;      /* native frames kept per event; 0: ALLOCSCOPE_MAX_FRAMES or 32 */
  int32_t dump_on_oom;     /* 1 yes, 0 no, -1: ALLOCSCOPE_DUMP_ON_OOM or yes */
  int32_t dump_signal;     /* signal number that dumps (e.g. SIGUSR1), 0 none, -1: ALLOCSCOPE_DUMP_SIGNAL or none */
  int32_t dump_at_exit;    /* 1 yes, 0 no, -1: ALLOCSCOPE_DUMP_AT_EXIT or yes */
} allocscope_capture_options;

/* Fills `options` with "use the environment" values. */
void allocscope_capture_default_options(allocscope_capture_options* options);

/* Starts recording (subscribes to CUPTI when the library was built with CUDA). 0 on success, -1 on error
   (see allocscope_capture_last_error). Starting again while recording changes nothing and returns 0. */
int allocscope_capture_start(const allocscope_capture_options* options);

/* Writes a PyTorch-compatible snapshot to `path` (NULL: the configured output path). 0 on success, -1 on error. */
int allocscope_capture_dump(const char* path);

/* Writes the configured output as PyTorch's snapshot `pytorch_snapshot` (a file torch.cuda.memory._dump_snapshot
   wrote, in this process, just now) with this capture's device memory outside PyTorch's caching allocator added
   under the key "allocscope_outside" (NCCL, cuBLAS, other libraries, the job's own calls). PyTorch's tools read the
   result as PyTorch's file; allocscope also shows the outside memory. `final` != 0: the job is ending, and the
   capture's own dump at exit will not overwrite the result. 0 on success, -1 on error. */
int allocscope_capture_dump_merged(const char* pytorch_snapshot, int final);

/* For Python jobs (the bootstrap calls these around PyTorch's backward): the calling Python thread is about to wait
   for threads that run no Python (PyTorch's autograd engine); until the matching end, their allocations are recorded
   with this thread's Python frames as they are now, leaving out those of the function that called begin. Call on
   the thread that waits (the GIL need not be held). begin returns a token for end; 0 means nothing was lent. */
int allocscope_capture_python_lend_begin(void);
void allocscope_capture_python_lend_end(int token);
/* The same, naming the call ("backward", "all_reduce"): the loan is also kept as a time span with those frames, so
   that PyTorch's own entries of that span without frames (a merged snapshot's PyTorch part) get them when loaded. */
int allocscope_capture_python_lend_begin_for(const char* call);

/* What this capture will not see, said in the file (allocator_settings['allocscope_capture']['notes'][key]) so that
   the answers can say it too: e.g. "torch_recorder" -> "not started: ...". The last text for a key wins; an empty
   text withdraws the note. */
void allocscope_capture_note(const char* key, const char* text);

/* Stops recording (unsubscribes); keeps what was recorded until the next start. 0 on success. */
int allocscope_capture_stop(void);

/* 1 while recording. */
int allocscope_capture_active(void);

/* Named ranges, recorded like PyTorch's external_annotations; nested ranges form a path in events' metadata. */
void allocscope_capture_push(const char* name);
void allocscope_capture_pop(void);

/* The path this process's snapshot is written to (the configured output with %p, %r and %% expanded), NUL-ended,
   into `out` of `size` bytes. 0 on success, -1 when it does not fit or the environment is invalid. */
int allocscope_capture_output_path(char* out, size_t size);

/* The last error of this thread, in words ("" when none). Valid until the next call on this thread. */
const char* allocscope_capture_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* ALLOCSCOPE_CAPTURE_H_ */
