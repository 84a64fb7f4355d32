// Pickle opcode values (CPython Lib/pickle.py) and their names for error messages.
#pragma once

#include <cstdint>
#include <string>

#include "allocscope/pickle.h"

namespace allocscope::pickle {

enum Opcode : uint8_t {
  kMARK = '(', kSTOP = '.', kPOP = '0', kPOP_MARK = '1', kDUP = '2', kFLOAT = 'F', kINT = 'I', kBININT = 'J',
  kBININT1 = 'K', kLONG = 'L', kBININT2 = 'M', kNONE = 'N', kPERSID = 'P', kBINPERSID = 'Q', kREDUCE = 'R',
  kSTRING = 'S', kBINSTRING = 'T', kSHORT_BINSTRING = 'U', kUNICODE = 'V', kBINUNICODE = 'X', kAPPEND = 'a',
  kBUILD = 'b', kGLOBAL = 'c', kDICT = 'd', kEMPTY_DICT = '}', kAPPENDS = 'e', kGET = 'g', kBINGET = 'h',
  kINST = 'i', kLONG_BINGET = 'j', kLIST = 'l', kEMPTY_LIST = ']', kOBJ = 'o', kPUT = 'p', kBINPUT = 'q',
  kLONG_BINPUT = 'r', kSETITEM = 's', kTUPLE = 't', kEMPTY_TUPLE = ')', kSETITEMS = 'u', kBINFLOAT = 'G',
  kPROTO = 0x80, kNEWOBJ = 0x81, kEXT1 = 0x82, kEXT2 = 0x83, kEXT4 = 0x84, kTUPLE1 = 0x85, kTUPLE2 = 0x86,
  kTUPLE3 = 0x87, kNEWTRUE = 0x88, kNEWFALSE = 0x89, kLONG1 = 0x8a, kLONG4 = 0x8b,
  kBINBYTES = 'B', kSHORT_BINBYTES = 'C',
  kSHORT_BINUNICODE = 0x8c, kBINUNICODE8 = 0x8d, kBINBYTES8 = 0x8e, kEMPTY_SET = 0x8f, kADDITEMS = 0x90,
  kFROZENSET = 0x91, kNEWOBJ_EX = 0x92, kSTACK_GLOBAL = 0x93, kMEMOIZE = 0x94, kFRAME = 0x95,
  kBYTEARRAY8 = 0x96, kNEXT_BUFFER = 0x97, kREADONLY_BUFFER = 0x98,
};

const char* opcode_name(uint8_t op);  // "BINUNICODE", or nullptr when unknown
std::string opcode_label(uint8_t op);  // "0x58 BINUNICODE"
const char* tag_name(Tag t);           // "dict", "list", ...

}  // namespace allocscope::pickle
