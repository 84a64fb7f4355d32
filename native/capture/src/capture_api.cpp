// The C ABI of allocscope_capture.h over the Session; errors become -1 plus a per-thread message.
#include "allocscope_capture.h"

#include <cstring>
#include <string>

#include "python_frames.h"
#include "session.h"

using allocscope::Status;
using namespace allocscope::capture;

namespace {

thread_local std::string t_error;

int report(const Status& st) {
  if (st.ok()) {
    t_error.clear();
    return 0;
  }
  t_error = st.error().describe();
  return -1;
}

int16_t device_now() {
  const Backend* b = backend();
  return b && b->current_device ? b->current_device() : 0;
}

}  // namespace

extern "C" {

void allocscope_capture_default_options(allocscope_capture_options* o) {
  if (!o) return;
  *o = allocscope_capture_options{};
  o->struct_size = sizeof(allocscope_capture_options);
  o->stacks = -1;
  o->dump_on_oom = -1;
  o->dump_signal = -1;
  o->dump_at_exit = -1;
}

int allocscope_capture_start(const allocscope_capture_options* in) {
  allocscope_capture_options o;
  allocscope_capture_default_options(&o);
  if (in) {
    if (in->struct_size < sizeof(uint32_t) || in->struct_size > sizeof(o))
      return report(allocscope::Error{"allocscope_capture_start: unexpected options.struct_size"});
    std::memcpy(&o, in, in->struct_size);
  }
  auto env = options_from_env();
  if (!env.ok()) return report(env.error());
  Options opt = *env;
  if (o.output_path && *o.output_path) opt.output_path = o.output_path;
  if (o.max_entries) opt.max_entries = o.max_entries;
  if (o.stacks == ALLOCSCOPE_STACKS_NONE) opt.stacks = StackMode::kNone;
  if (o.stacks == ALLOCSCOPE_STACKS_NATIVE) opt.stacks = StackMode::kNative;
  if (o.stacks == ALLOCSCOPE_STACKS_PYTHON) opt.stacks = StackMode::kPython;
  if (o.max_frames > 0) opt.max_frames = o.max_frames > kMaxFramesLimit ? kMaxFramesLimit : o.max_frames;
  if (o.dump_on_oom >= 0) opt.dump_on_oom = o.dump_on_oom != 0;
  if (o.dump_signal >= 0) opt.dump_signal = o.dump_signal;
  if (o.dump_at_exit >= 0) opt.dump_at_exit = o.dump_at_exit != 0;
  return report(Session::get().start(opt));
}

int allocscope_capture_dump(const char* path) { return report(Session::get().dump(path ? path : "")); }

int allocscope_capture_dump_merged(const char* pytorch_snapshot, int final) {
  return report(Session::get().dump_merged(pytorch_snapshot ? pytorch_snapshot : "", final != 0));
}

int allocscope_capture_python_lend_begin(void) { return allocscope_capture_python_lend_begin_for(""); }

int allocscope_capture_python_lend_begin_for(const char* call) {
  const int token = python_frames_lend_begin();
  if (Recorder* r = Session::get().recorder(); r && token > 0) {
    uintptr_t frames[kMaxPythonFrames];
    r->on_lend_begin(token, call, frames, python_frames_loan(token, frames, kMaxPythonFrames));
  }
  return token;
}

void allocscope_capture_python_lend_end(int token) {
  // The window closes first: an allocation between the two is still the loan's.
  if (Recorder* r = Session::get().recorder()) r->on_lend_end(token);
  python_frames_lend_end(token);
}

void allocscope_capture_note(const char* key, const char* text) {
  if (key && *key) Session::get().note(key, text ? text : "");
}

int allocscope_capture_stop(void) { return report(Session::get().stop()); }

int allocscope_capture_active(void) { return Session::get().recorder() != nullptr; }

void allocscope_capture_push(const char* name) {
  if (Recorder* r = Session::get().recorder()) r->push_range(name, device_now());
}

void allocscope_capture_pop(void) {
  if (Recorder* r = Session::get().recorder()) r->pop_range(device_now());
}

int allocscope_capture_output_path(char* out, size_t size) {
  std::string pattern;
  if (Recorder* r = Session::get().recorder()) {
    pattern = r->options().output_path;
  } else {
    auto env = options_from_env();
    if (!env.ok()) return report(env.error());
    pattern = env->output_path;
  }
  const std::string path = job_output_path(pattern);
  if (!out || path.size() + 1 > size)
    return report(allocscope::Error{"allocscope_capture_output_path: the path needs " + std::to_string(path.size() + 1) +
                                    " bytes"});
  std::memcpy(out, path.c_str(), path.size() + 1);
  return report(allocscope::Status{});
}

const char* allocscope_capture_last_error(void) { return t_error.c_str(); }

}  // extern "C"
