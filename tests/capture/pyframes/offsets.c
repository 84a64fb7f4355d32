#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#if PY_VERSION_HEX >= 0x030B0000
#include "internal/pycore_frame.h"
#else
#include "frameobject.h"
#endif
#include <stdio.h>
#define P(s,f) printf("%-40s %zu\n", #s "." #f, offsetof(s,f))
int main(){
 printf("version %s\n", PY_VERSION);
#if PY_VERSION_HEX < 0x030B0000
 P(PyThreadState,frame); P(PyFrameObject,f_back); P(PyFrameObject,f_code); P(PyFrameObject,f_lasti);
 P(PyCodeObject,co_filename); P(PyCodeObject,co_name); P(PyCodeObject,co_linetable); P(PyCodeObject,co_firstlineno);
 printf("PyASCIIObject %zu PyCompactUnicodeObject %zu PyBytes.ob_sval %zu PyVarObject.ob_size %zu\n", sizeof(PyASCIIObject), sizeof(PyCompactUnicodeObject), offsetof(PyBytesObject, ob_sval), offsetof(PyVarObject, ob_size));
 return 0;
}
#else
#if PY_VERSION_HEX < 0x030D0000
 P(PyThreadState,cframe); P(_PyCFrame,current_frame);
 P(_PyInterpreterFrame,f_code); P(_PyInterpreterFrame,prev_instr);
#else
 P(PyThreadState,current_frame); P(_PyInterpreterFrame,f_executable); P(_PyInterpreterFrame,instr_ptr);
#endif
 P(_PyInterpreterFrame,previous); P(_PyInterpreterFrame,owner);
#if PY_VERSION_HEX < 0x030C0000
 P(_PyInterpreterFrame,is_entry);
#else
 printf("FRAME_OWNED_BY_CSTACK %d\n", FRAME_OWNED_BY_CSTACK);
#endif
 printf("FRAME_OWNED_BY_GENERATOR %d\n", FRAME_OWNED_BY_GENERATOR);
 P(PyCodeObject,co_filename); P(PyCodeObject,co_name); P(PyCodeObject,co_qualname); P(PyCodeObject,co_linetable); P(PyCodeObject,co_firstlineno); P(PyCodeObject,co_code_adaptive);
 printf("PyASCIIObject %zu PyCompactUnicodeObject %zu PyBytes.ob_sval %zu PyVarObject.ob_size %zu\n", sizeof(PyASCIIObject), sizeof(PyCompactUnicodeObject), offsetof(PyBytesObject, ob_sval), offsetof(PyVarObject, ob_size));
}
#endif
