"""ctypes bindings of liballocscope (native/api/allocscope.h): one typed stub per C function, and the core's error
strings raised as AllocscopeError."""
import ctypes
import json

from . import _paths


class AllocscopeError(Exception):
    """An answer or a load that failed; the message is the core's ("FILE: at byte N: what was expected")."""


class _Columns(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("rows", ctypes.c_uint64),
        ("steps", ctypes.c_uint64),
        ("addr", ctypes.POINTER(ctypes.c_uint64)),
        ("size", ctypes.POINTER(ctypes.c_uint64)),
        ("stream", ctypes.POINTER(ctypes.c_int64)),
        ("alloc_step", ctypes.POINTER(ctypes.c_uint32)),
        ("free_step", ctypes.POINTER(ctypes.c_uint32)),
        ("alloc_time_us", ctypes.POINTER(ctypes.c_int64)),
        ("free_time_us", ctypes.POINTER(ctypes.c_int64)),
        ("site", ctypes.POINTER(ctypes.c_uint32)),
        ("category", ctypes.POINTER(ctypes.c_uint8)),
        ("total", ctypes.POINTER(ctypes.c_uint64)),
        ("sites_json", ctypes.c_char_p),
    ]


_lib = None
_c_str_out = ctypes.POINTER(ctypes.c_void_p)


def lib():
    """The loaded library, with its functions typed (loaded once)."""
    global _lib
    if _lib is not None:
        return _lib
    path = _paths.library()
    if path is None:
        raise AllocscopeError("liballocscope.so not found: install allocscope with pip, or build it "
                              "(cmake --workflow --preset default), or set ALLOCSCOPE_LIBRARY")
    try:
        l = ctypes.CDLL(str(path))
    except OSError as e:
        raise AllocscopeError("cannot load %s: %s" % (path, e)) from None
    vp = ctypes.c_void_p
    l.allocscope_version.restype = ctypes.c_char_p
    l.allocscope_abi_version.restype = ctypes.c_int
    l.allocscope_load.argtypes = [ctypes.c_char_p, ctypes.c_char_p, _c_str_out]
    l.allocscope_load.restype = vp
    l.allocscope_load_window.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                         _c_str_out]
    l.allocscope_load_window.restype = vp
    l.allocscope_load_bytes.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, _c_str_out]
    l.allocscope_load_bytes.restype = vp
    l.allocscope_close.argtypes = [vp]
    l.allocscope_answer.argtypes = [ctypes.c_char_p, ctypes.POINTER(vp), ctypes.c_size_t, ctypes.c_char_p,
                                    _c_str_out, _c_str_out, _c_str_out]
    l.allocscope_answer.restype = ctypes.c_int
    l.allocscope_answer_specs.restype = vp
    l.allocscope_allocations.argtypes = [vp, ctypes.c_int64, ctypes.POINTER(_Columns), _c_str_out]
    l.allocscope_allocations.restype = ctypes.c_int
    l.allocscope_devices.argtypes = [vp]
    l.allocscope_devices.restype = vp
    l.allocscope_category_names.restype = vp
    l.allocscope_output_path.argtypes = [ctypes.c_char_p]
    l.allocscope_output_path.restype = vp
    l.allocscope_report_html.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_size_t,
                                         _c_str_out]
    l.allocscope_report_html.restype = vp
    l.allocscope_report_html_window.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_size_t,
                                                ctypes.c_char_p, ctypes.c_char_p, _c_str_out]
    l.allocscope_report_html_window.restype = vp
    l.allocscope_free.argtypes = [vp]
    if l.allocscope_abi_version() != 1:
        raise AllocscopeError("%s has ABI version %d; this module needs 1" % (path, l.allocscope_abi_version()))
    _lib = l
    return l


def _take(ptr):
    """A string the library allocated, decoded and freed (None stays None)."""
    if not ptr:
        return None
    try:
        return ctypes.string_at(ptr).decode("utf-8", errors="replace")
    finally:
        lib().allocscope_free(ptr)


def load(path, name=None, window_from=None, window_to=None):
    """A handle of a loaded snapshot file (only a window of its traces when window_from/window_to are given)."""
    err = ctypes.c_void_p()
    text = lambda v: None if v is None else str(v).encode()
    handle = lib().allocscope_load_window(str(path).encode(), None if name is None else str(name).encode(),
                                          text(window_from), text(window_to), ctypes.byref(err))
    if not handle:
        raise AllocscopeError(_take(err.value) or "cannot load %s" % path)
    return handle


def load_bytes(data, name):
    err = ctypes.c_void_p()
    data = bytes(data)
    handle = lib().allocscope_load_bytes(data, len(data), str(name).encode(), ctypes.byref(err))
    if not handle:
        raise AllocscopeError(_take(err.value) or "cannot load %s" % name)
    return handle


def close(handle):
    if handle:
        lib().allocscope_close(handle)


def answer(name, handles, options):
    """(exit status, stdout text, notes) of answer `name`; options: a list of (name, value) strings."""
    arr = (ctypes.c_void_p * len(handles))(*handles)
    out, notes, err = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    status = lib().allocscope_answer(name.encode(), arr, len(handles), json.dumps(options).encode(),
                                     ctypes.byref(out), ctypes.byref(notes), ctypes.byref(err))
    text, note_text, error = _take(out.value), _take(notes.value), _take(err.value)
    if status < 0:
        raise AllocscopeError(error or "%s failed" % name)
    return status, text or "", [n for n in (note_text or "").split("\n") if n]


def output_path(pattern):
    """The path a job writes for `pattern` (%p, %r, and -rankN under a launcher of several ranks)."""
    return _take(lib().allocscope_output_path(str(pattern).encode()))


def specs():
    return json.loads(_take(lib().allocscope_answer_specs()))


def devices(handle):
    return json.loads(_take(lib().allocscope_devices(handle)))


def category_names():
    return json.loads(_take(lib().allocscope_category_names()))


def columns(handle, device):
    """The device's allocation columns (allocscope_columns), as a _Columns whose arrays live as long as `handle`."""
    c = _Columns()
    c.struct_size = ctypes.sizeof(_Columns)
    err = ctypes.c_void_p()
    if lib().allocscope_allocations(handle, int(device), ctypes.byref(c), ctypes.byref(err)) != 0:
        raise AllocscopeError(_take(err.value) or "no allocations for device %s" % device)
    return c
