// Names of pickle opcodes and value tags, for error messages.
#include "pickle/opcodes.h"

#include <cstdio>

namespace allocscope::pickle {

const char* opcode_name(uint8_t op) {
  switch (op) {
#define N(x) case k##x: return #x;
    N(MARK) N(STOP) N(POP) N(POP_MARK) N(DUP) N(FLOAT) N(INT) N(BININT) N(BININT1) N(LONG) N(BININT2) N(NONE)
    N(PERSID) N(BINPERSID) N(REDUCE) N(STRING) N(BINSTRING) N(SHORT_BINSTRING) N(UNICODE) N(BINUNICODE) N(APPEND)
    N(BUILD) N(GLOBAL) N(DICT) N(EMPTY_DICT) N(APPENDS) N(GET) N(BINGET) N(INST) N(LONG_BINGET) N(LIST)
    N(EMPTY_LIST) N(OBJ) N(PUT) N(BINPUT) N(LONG_BINPUT) N(SETITEM) N(TUPLE) N(EMPTY_TUPLE) N(SETITEMS)
    N(BINFLOAT) N(PROTO) N(NEWOBJ) N(EXT1) N(EXT2) N(EXT4) N(TUPLE1) N(TUPLE2) N(TUPLE3) N(NEWTRUE) N(NEWFALSE)
    N(LONG1) N(LONG4) N(BINBYTES) N(SHORT_BINBYTES) N(SHORT_BINUNICODE) N(BINUNICODE8) N(BINBYTES8) N(EMPTY_SET)
    N(ADDITEMS) N(FROZENSET) N(NEWOBJ_EX) N(STACK_GLOBAL) N(MEMOIZE) N(FRAME) N(BYTEARRAY8) N(NEXT_BUFFER)
    N(READONLY_BUFFER)
#undef N
    default: return nullptr;
  }
}

std::string opcode_label(uint8_t op) {
  char buf[48];
  const char* n = opcode_name(op);
  std::snprintf(buf, sizeof buf, "0x%02x %s", op, n ? n : "(unknown)");
  return buf;
}

const char* tag_name(Tag t) {
  switch (t) {
    case Tag::kNone: return "None";
    case Tag::kBool: return "bool";
    case Tag::kInt: case Tag::kUInt: return "int";
    case Tag::kFloat: return "float";
    case Tag::kStr: return "str";
    case Tag::kBytes: return "bytes";
    case Tag::kList: return "list";
    case Tag::kDict: return "dict";
    case Tag::kTuple: return "tuple";
    case Tag::kSet: return "set";
    case Tag::kHandle: return "consumed object";
  }
  return "?";
}

}  // namespace allocscope::pickle
