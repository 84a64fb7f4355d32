// C++ wrapper over allocscope_capture.h: a recording object that starts and stops recording, and RAII named ranges.
#pragma once

#include <string>

#include "allocscope_capture.h"

namespace allocscope::capture {

// Starts recording on construction (check ok()), stops on destruction unless released.
class Recording {
 public:
  explicit Recording(const allocscope_capture_options* options = nullptr) {
    allocscope_capture_options o;
    allocscope_capture_default_options(&o);
    ok_ = allocscope_capture_start(options ? options : &o) == 0;
    if (!ok_) error_ = allocscope_capture_last_error();
  }
  ~Recording() {
    if (ok_) allocscope_capture_stop();
  }
  Recording(const Recording&) = delete;
  Recording& operator=(const Recording&) = delete;

  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  // Writes a snapshot; "" uses the configured output path. Returns false and sets error() on failure.
  bool dump(const std::string& path = "") {
    if (allocscope_capture_dump(path.empty() ? nullptr : path.c_str()) == 0) return true;
    error_ = allocscope_capture_last_error();
    return false;
  }

 private:
  bool ok_ = false;
  std::string error_;
};

// A named range for the lifetime of the object: `allocscope::capture::Scope s("forward");`
class Scope {
 public:
  explicit Scope(const char* name) { allocscope_capture_push(name); }
  ~Scope() { allocscope_capture_pop(); }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
};

}  // namespace allocscope::capture
