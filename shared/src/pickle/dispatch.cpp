// The opcode dispatch loop of the pickle machine.
#include <algorithm>

#include "pickle/machine.h"

namespace allocscope::pickle::detail {

// The dispatch loop: one function for all opcodes so the hot ones (BINGET, MEMOIZE, ints) cost a few instructions.
bool Machine::step() {
  const uint64_t total = static_cast<uint64_t>(end_ - begin_);
  // An offset, not a pointer: finish() may run over an empty remainder whose begin_ is null.
  size_t next_report = 4u << 20;
  // One comparison per opcode: `check` is the nearer of the end of the buffer and the next progress report.
  size_t check = std::min<size_t>(next_report, total);
  for (;;) {
  if (__builtin_expect(static_cast<size_t>(p_ - begin_) >= check, 0)) {
    if (p_ >= end_) {
      op_start_ = p_;
      op_ = 0;
      if (!last_) return wait_for_more();
      return fail(Error{"expected an opcode (the pickle has no STOP; truncated file?)", off()});
    }
    *pos_out_ = im_.base + static_cast<uint64_t>(p_ - begin_);
    if (progress_ && *progress_) (*progress_)(*pos_out_, total);
    next_report = static_cast<size_t>(p_ - begin_) + (4u << 20);
    check = std::min<size_t>(next_report, total);
  }
  op_start_ = p_;
  op_ = *p_++;
  switch (op_) {
    case kPROTO: {
      if (!have(1)) return truncated(1);
      im_.proto = *p_++;
      if (im_.proto > 5) return err("protocol " + std::to_string(im_.proto) + " is newer than 5, the highest known");
      continue;
    }
    case kFRAME: {
      if (!have(8)) return truncated(8);
      uint64_t n = read_le<uint64_t>();
      // A frame is only a read-ahead hint; while streaming, the rest of it may still be coming.
      if (last_ && n > static_cast<uint64_t>(end_ - p_))
        return err("expected a frame of " + std::to_string(n) + " bytes, but only " + std::to_string(end_ - p_) +
                   " bytes are left (truncated file?)");
      continue;
    }
    case kSTOP: im_.stopped = true; return true;
    case kMARK:
      // "MARK BINGET... APPENDS" onto a list (the frame list of every trace entry): the references go straight into
      // the list. Anything unusual leaves the input untouched for the general path below.
      if (p_ < end_ && (*p_ == kBINGET || *p_ == kLONG_BINGET) && !im_.stack.empty() &&
          im_.stack.back().tag == Tag::kList && append_memo_run())
        continue;
      if (im_.marks.size() >= lim_.max_marks)
        return err("more than " + std::to_string(lim_.max_marks) + " open MARKs (limit)");
      im_.marks.push_back(im_.stack.size());
      continue;
    case kPOP: {
      if (!im_.marks.empty() && im_.marks.back() == im_.stack.size()) {
        im_.marks.pop_back();  // POP of a MARK discards it, as Python does
        continue;
      }
      Value v;
      if (!(pop(&v))) return false;
      continue;
    }
    case kPOP_MARK: {
      size_t m = 0;
      if (!pop_mark(&m)) return false;
      im_.stack.truncate(m);
      continue;
    }
    case kDUP: {
      if (im_.stack.empty()) return err("expected a value to duplicate, found an empty stack");
      const Value v = im_.stack.back();
      if (v.is_container()) {
        Node* np = nullptr;
        if (!node_of(v, &np)) return false;
        np->shared = true;
      }
      if (!(push(v))) return false;
      continue;
    }
    case kNONE: if (!(push(Value::none()))) return false;
      continue;
    case kNEWTRUE: if (!(push(Value::boolean(true)))) return false;
      continue;
    case kNEWFALSE: if (!(push(Value::boolean(false)))) return false;
      continue;
    case kBININT: {
      if (!have(4)) return truncated(4);
      if (!(push(Value::integer(read_le<int32_t>())))) return false;
      continue;
    }
    case kBININT1: {
      if (!have(1)) return truncated(1);
      if (!(push(Value::integer(*p_++)))) return false;
      continue;
    }
    case kBININT2: {
      if (!have(2)) return truncated(2);
      if (!(push(Value::integer(read_le<uint16_t>())))) return false;
      continue;
    }
    case kLONG1: {
      if (!have(1)) return truncated(1);
      size_t n = *p_++;
      if (!have(n)) return truncated(n);
      const uint8_t* b = p_;
      p_ += n;
      if (n - 1 < 8) {  // addresses and times: 1..8 bytes
        if (!push(Value::integer(small_long(b, n, static_cast<size_t>(end_ - b))))) return false;
        continue;
      }
      if (!(push_long(b, n))) return false;
      continue;
    }
    case kLONG4: {
      if (!have(4)) return truncated(4);
      int32_t n = read_le<int32_t>();
      if (n < 0) return err("negative length " + std::to_string(n));
      if (!have(static_cast<size_t>(n))) return truncated(static_cast<size_t>(n));
      const uint8_t* b = p_;
      p_ += n;
      if (!(push_long(b, static_cast<size_t>(n)))) return false;
      continue;
    }
    case kINT:
    case kLONG: {
      std::string_view line;
      if (!read_line(&line)) return false;
      if (!(text_int(line, op_ == kLONG))) return false;
      continue;
    }
    case kBINFLOAT: {
      if (!have(8)) return truncated(8);
      uint64_t be;
      std::memcpy(&be, p_, 8);
      p_ += 8;
      be = __builtin_bswap64(be);
      double d;
      std::memcpy(&d, &be, 8);
      if (!(push_double(d))) return false;
      continue;
    }
    case kFLOAT: {
      std::string_view line;
      if (!read_line(&line)) return false;
      std::string t(line);
      char* e = nullptr;
      double d = std::strtod(t.c_str(), &e);
      if (t.empty() || *e) return err("expected a decimal float, found '" + t.substr(0, 40) + "'");
      if (!(push_double(d))) return false;
      continue;
    }
    case kSHORT_BINUNICODE:
    case kSHORT_BINSTRING:
    case kSHORT_BINBYTES: {
      if (!have(1)) return truncated(1);
      size_t n = *p_++;
      if (!have(n)) return truncated(n);
      const uint8_t* b = p_;
      p_ += n;
      if (!(push_string(b, n, op_ == kSHORT_BINBYTES ? Tag::kBytes : Tag::kStr))) return false;
      continue;
    }
    case kBINUNICODE:
    case kBINSTRING:
    case kBINBYTES: {
      if (!have(4)) return truncated(4);
      uint64_t n = op_ == kBINSTRING ? static_cast<uint64_t>(read_le<int32_t>()) : read_le<uint32_t>();
      if (op_ == kBINSTRING && static_cast<int64_t>(n) < 0) return err("negative length");
      if (!have(n)) return truncated(n);
      const uint8_t* b = p_;
      p_ += n;
      if (!(push_string(b, n, op_ == kBINBYTES ? Tag::kBytes : Tag::kStr))) return false;
      continue;
    }
    case kBINUNICODE8:
    case kBINBYTES8:
    case kBYTEARRAY8: {
      if (!have(8)) return truncated(8);
      uint64_t n = read_le<uint64_t>();
      if (n > static_cast<uint64_t>(end_ - p_)) return truncated(n);
      if (n > UINT32_MAX) return err("string of " + std::to_string(n) + " bytes is larger than 4 GiB (limit)");
      const uint8_t* b = p_;
      p_ += n;
      if (!(push_string(b, n, op_ == kBINUNICODE8 ? Tag::kStr : Tag::kBytes))) return false;
      continue;
    }
    case kSTRING: {
      std::string_view line;
      if (!read_line(&line)) return false;
      std::string out;
      if (!python_string_literal(line, &out))
        return err("expected a quoted string literal, found '" + std::string(line.substr(0, 40)) + "'");
      if (!(push_string(reinterpret_cast<const uint8_t*>(out.data()), out.size(), Tag::kStr))) return false;
      continue;
    }
    case kUNICODE: {
      std::string_view line;
      if (!read_line(&line)) return false;
      std::string out;
      raw_unicode_escape(line, &out);
      if (!(push_string(reinterpret_cast<const uint8_t*>(out.data()), out.size(), Tag::kStr))) return false;
      continue;
    }
    case kEMPTY_DICT:
    case kEMPTY_LIST:
    case kEMPTY_SET: {
      // A trace entry (or a frame) inside a list's batch: decoded whole and offered without a container.
      if (op_ == kEMPTY_DICT && consumer_ && entry_fast()) continue;
      Value v;
      if (!new_node(op_ == kEMPTY_DICT ? Tag::kDict : op_ == kEMPTY_LIST ? Tag::kList : Tag::kSet, &v)) return false;
      if (!(push(v))) return false;
      continue;
    }
    case kEMPTY_TUPLE: if (!(build_from(Tag::kTuple, im_.stack.size()))) return false;
      continue;
    case kTUPLE1:
    case kTUPLE2:
    case kTUPLE3: {
      size_t n = op_ - kTUPLE1 + 1;
      size_t floor = im_.marks.empty() ? 0 : im_.marks.back();
      if (im_.stack.size() < floor + n)
        return err("expected " + std::to_string(n) + " values for the tuple, found " +
                   std::to_string(im_.stack.size() - floor));
      if (!(build_from(Tag::kTuple, im_.stack.size() - n))) return false;
      continue;
    }
    case kTUPLE: if (!(build_from_mark(Tag::kTuple))) return false;
      continue;
    case kLIST: if (!(build_from_mark(Tag::kList))) return false;
      continue;
    case kDICT: if (!(build_from_mark(Tag::kDict))) return false;
      continue;
    case kFROZENSET: if (!(build_from_mark(Tag::kSet))) return false;
      continue;
    case kAPPEND: {
      size_t floor = im_.marks.empty() ? 0 : im_.marks.back();
      if (im_.stack.size() < floor + 2) return err("expected a list and a value on the stack");
      if (!(append_range(im_.stack.size() - 1))) return false;
      continue;
    }
    case kAPPENDS:
    case kADDITEMS: {
      size_t m = 0;
      if (!pop_mark(&m)) return false;
      if (!(append_range(m))) return false;
      continue;
    }
    case kSETITEM: {
      size_t floor = im_.marks.empty() ? 0 : im_.marks.back();
      if (im_.stack.size() < floor + 3) return err("expected a dict, a key and a value on the stack");
      if (!(setitems_range(im_.stack.size() - 2))) return false;
      continue;
    }
    case kSETITEMS: {
      size_t m = 0;
      if (!pop_mark(&m)) return false;
      if (!(setitems_range(m))) return false;
      if (!offer_in_batch()) return false;
      continue;
    }
    case kMEMOIZE: if (!(memo_put(im_.memo.size()))) return false;
      continue;
    case kBINPUT: {
      if (!have(1)) return truncated(1);
      if (!(memo_put(*p_++))) return false;
      continue;
    }
    case kLONG_BINPUT: {
      if (!have(4)) return truncated(4);
      if (!(memo_put(read_le<uint32_t>()))) return false;
      continue;
    }
    case kPUT:
    case kGET: {
      std::string_view line;
      if (!read_line(&line)) return false;
      std::string t(line);
      char* e = nullptr;
      errno = 0;
      unsigned long long idx = std::strtoull(t.c_str(), &e, 10);
      if (t.empty() || *e || errno) return err("expected a decimal memo index, found '" + t.substr(0, 40) + "'");
      if (!(op_ == kPUT ? memo_put(idx) : memo_get(idx))) return false;
      continue;
    }
    case kBINGET:
    case kLONG_BINGET: {
      // Runs of memo references (a frame list is dozens in a row) go through one tight loop with the cursor in a
      // register; any problem falls back to the general path for the exact error.
      const uint8_t* p = op_start_;
      const auto& memo = im_.memo;
      const uint64_t memo_size = memo.size();
      auto& stack = im_.stack;
      size_t room = lim_.max_stack > stack.size() ? lim_.max_stack - stack.size() : 0;
      while (room) {
        uint64_t idx;
        const uint8_t* q = p;
        if (!memo_ref(q, end_, &idx) || idx >= memo_size) break;
        const Value v = memo.get(idx);
        // Scalars and handles only; unset slots and containers take the general path below.
        if (v.tag == Tag::kNone ? v.aux == kUnsetMemo : v.is_container()) break;
        stack.push_back(v);
        --room;
        p = q;
        if (p >= end_) break;
      }
      if (p != op_start_) {  // consumed at least one reference; resume dispatch after the run
        p_ = p;
        continue;
      }
      // First reference of the run needs the general path (container, error, or limit).
      if (op_ == kBINGET) {
        if (!have(1)) return truncated(1);
        if (!(memo_get(*p_++))) return false;
        continue;
      }
      if (!have(4)) return truncated(4);
      if (!(memo_get(read_le<uint32_t>()))) return false;
      continue;
    }
    case kREADONLY_BUFFER:
      if (im_.stack.empty()) return err("expected a buffer on the stack");
      continue;
    case kNEXT_BUFFER:
      return err("out-of-band buffers (protocol 5 NEXT_BUFFER) are not part of a snapshot and cannot be read");
    case kGLOBAL:
    case kSTACK_GLOBAL:
    case kREDUCE:
    case kBUILD:
    case kINST:
    case kOBJ:
    case kNEWOBJ:
    case kNEWOBJ_EX:
    case kPERSID:
    case kBINPERSID:
    case kEXT1:
    case kEXT2:
    case kEXT4:
      return err("refers to a Python class or function; snapshots contain only dicts, lists and scalars, and "
                 "allocscope never executes anything from a file");
    default:
      return err("unknown opcode (not a pickle, or a corrupted one)");
  }
  }
}

}  // namespace allocscope::pickle::detail
