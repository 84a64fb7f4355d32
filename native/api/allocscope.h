/* liballocscope: the answers of the allocscope command-line tool as a C ABI, for other languages (the Python module
   loads it with ctypes). Every answer is the CLI's own JSON, computed by the same C++ core in this process. Loading
   a snapshot reads its pickle with allocscope's bounded reader, which builds plain tables and never imports or calls
   anything the file names (unlike Python's pickle.load). Strings returned are owned by the caller: free them with
   allocscope_free. No call keeps a pointer to the caller's memory. */
#ifndef ALLOCSCOPE_H_
#define ALLOCSCOPE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct allocscope_file allocscope_file;

/* The library's version ("0.1.0"), and the version of this ABI (bumped when a function changes). */
const char* allocscope_version(void);
int allocscope_abi_version(void);

/* Loads a snapshot (pickle, gzipped pickle, or PyTorch's trace_plot page) from `path`. NULL on failure, with the
   reason in *error ("PATH: at byte N: what was expected"). `name` is how answers name the file (NULL: `path`). */
allocscope_file* allocscope_load(const char* path, const char* name, char** error);
/* Loads only a window of each device's trace, as `allocscope peak FILE --from FROM --to TO` does: FROM and TO as the
   CLI takes them (a step, or a time with its unit: "1.5s"); NULL or "" leaves that end open. A bad window is an
   error naming the text. */
allocscope_file* allocscope_load_window(const char* path, const char* name, const char* from, const char* to,
                                        char** error);
/* The same from `size` bytes in memory (copied; the caller keeps its buffer). */
allocscope_file* allocscope_load_bytes(const uint8_t* data, size_t size, const char* name, char** error);
void allocscope_close(allocscope_file* file);

/* Runs answer `answer` ("summary", "peak", "leaks", "oom", "categories", "diff", "whatif", "export", "check") on
   `files` with `options_json`, a JSON array of [name, value] string pairs as the CLI's options ([["json", ""],
   ["top", "5"]]; NULL: none). Returns the CLI's exit status (0, or 3 for a suspected leak or a regression) and sets
   *out (stdout) and *notes (stderr lines, joined by newlines); -1 on an error, with the message in *error. */
int allocscope_answer(const char* answer, allocscope_file* const* files, size_t file_count, const char* options_json,
                      char** out, char** notes, char** error);

/* The options each answer takes, as JSON: {"peak": {"switches": [...], "values": [...], "files": [min, max]}, ...}. */
char* allocscope_answer_specs(void);

/* One device's allocations as columns (PyTorch's timeline rows: one per allocation, in stacking order). The arrays
   belong to `file` and stay valid until allocscope_close. `site` indexes `sites_json` (a JSON array of
   "file:line:function" strings, the deepest user frame; index 0 is "" for none) and `category` the names in
   allocscope_category_names. alloc_step/free_step: the steps an allocation is alive in, [alloc_step, free_step)
   (step s = after the first s events of the device's trace). 0 on success, -1 with *error (no such device). */
typedef struct allocscope_columns {
  uint32_t struct_size; /* set by the caller: sizeof(allocscope_columns) */
  uint64_t rows;
  uint64_t steps;
  const uint64_t* addr;
  const uint64_t* size;
  const int64_t* stream;
  const uint32_t* alloc_step;
  const uint32_t* free_step;
  const int64_t* alloc_time_us;
  const int64_t* free_time_us;
  const uint32_t* site;
  const uint8_t* category;
  const uint64_t* total; /* per step: the bytes alive (steps entries) */
  const char* sites_json;
} allocscope_columns;
int allocscope_allocations(allocscope_file* file, int64_t device, allocscope_columns* out, char** error);
/* The devices of the file as a JSON array of ordinals. */
char* allocscope_devices(allocscope_file* file);
/* The category names, a JSON array in the order of allocscope_columns.category. */
char* allocscope_category_names(void);

/* One self-contained offline HTML page of the viewer with the snapshot files at `paths` inside (what `allocscope
   plot` writes), from the viewer's site folder `site_dir` (index.html, its modules, allocscope.js and .wasm).
   NULL with *error on failure. */
char* allocscope_report_html(const char* site_dir, const char* const* paths, size_t path_count, char** error);
/* The same page opening only a window of each device's trace (`allocscope plot --from A --to B`): `from` and `to` as
   allocscope_load_window takes them (either may be NULL or empty). */
char* allocscope_report_html_window(const char* site_dir, const char* const* paths, size_t path_count,
                                    const char* from, const char* to, char** error);

/* The snapshot path a job writes for `pattern`, as `allocscope record -o` and the capture library name it: %p the
   process id, %r the rank, %% a %; under a launcher of several ranks (a world size above 1) a pattern with neither
   %p nor %r gets -rankN before its extension. NULL for NULL. */
char* allocscope_output_path(const char* pattern);

void allocscope_free(void* p);

#ifdef __cplusplus
}
#endif

#endif /* ALLOCSCOPE_H_ */
