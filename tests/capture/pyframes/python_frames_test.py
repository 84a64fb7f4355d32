#!/usr/bin/env python3
"""The capture's Python frames against Python's own traceback (the oracle).

A real interpreter calls the recorder's allocation hook through ctypes (python_shim.cpp): with the GIL released
(ctypes.CDLL, as PyTorch releases it around an op) and held (ctypes.PyDLL), on the main thread and on a
threading.Thread, from a generator, through C code that calls back into Python (sorted's key), from code objects that
are freed before the dump, and from a recursion deeper than the frames kept. Each call records
traceback.extract_stack() on the same line, so the expected frames are Python's answer for that very instruction.
The snapshot the recorder writes is then read with pickle (PyTorch's format) and its Python frames compared.

usage: python_frames_test.py PATH/TO/liballocscope_python_shim.so [--bench]
Exit 0 all agree, 1 a disagreement, 77 this Python's frames are not read (skip). --bench instead times the hook
(ns per event, GIL released, 30 Python frames deep, 32 native frames at most) with stacks none, native and python.
"""
import ctypes
import json
import os
import pickle
import sys
import tempfile
import threading
import traceback

SHIM = sys.argv[1]
free_gil = ctypes.CDLL(SHIM)   # foreign calls release the GIL
held_gil = ctypes.PyDLL(SHIM)  # foreign calls keep it
for lib in (free_gil, held_gil):
    lib.shim_alloc.argtypes = [ctypes.c_uint64, ctypes.c_uint64]
    lib.shim_start.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    lib.shim_python_status.restype = ctypes.c_char_p
    lib.shim_alloc_on_native_thread.argtypes = [ctypes.c_uint64, ctypes.c_uint64]
    lib.shim_lend_end.argtypes = [ctypes.c_int]

STACKS_NATIVE, STACKS_PYTHON = 1, 2
MAX_PYTHON_FRAMES = 64  # python_frames.h: kMaxPythonFrames

expected = {}  # address -> [(filename, line, name)], innermost first
next_addr = [0x10000]


def here():
    return [(f.filename, f.lineno, f.name) for f in reversed(traceback.extract_stack()[:-1])]


def addr():
    next_addr[0] += 0x1000
    return next_addr[0]


# Every hook call below shares its line with here(): the expected frames are those of that instruction.
def alloc_free(a):
    expected[a] = here(); free_gil.shim_alloc(a, 4096)


def alloc_held(a):
    expected[a] = here(); held_gil.shim_alloc(a, 4096)


def nested(depth, fn):
    if depth == 0:
        fn(addr())
        return
    nested(depth - 1, fn)


def generator():
    a = addr()
    yield 1
    expected[a] = here(); free_gil.shim_alloc(a, 4096)
    yield 2


def key_calls_back(x):
    a = addr()
    expected[a] = here(); free_gil.shim_alloc(a, 4096)
    return -x


def dynamic_code(i):
    # A new code object per call, freed after it ran: its address is reused by the next one, and the recorder must
    # still name each by its own file, function and line.
    src = "def made_%d(alloc, a):\n%s    alloc(a)\n" % (i, "    pass\n" * i)
    scope = {}
    exec(compile(src, "<made %d>" % i, "exec"), scope)
    a = addr()
    scope["made_%d" % i](alloc_free, a)


def non_ascii_names():
    # Names and files stored as CPython's Latin-1, UCS-2 and UCS-4 strings (not ASCII): read and re-encoded as UTF-8.
    for fn, file in (("größe", "<fichier été>"), ("δέλτα", "<файл>"), ("\U00020000", "<文件 \U00020001>")):
        scope = {}
        exec(compile("def %s(alloc, a):\n    alloc(a)\n" % fn, file, "exec"), scope)
        scope[fn](alloc_free, addr())


def engine_wait(a):
    # As the bootstrap wraps PyTorch's _engine_run_backward: while this thread waits in the function it wraps, a thread
    # that runs no Python (the autograd engine's) allocates and is given this thread's frames, without this one's.
    token = held_gil.shim_lend_begin()
    try:
        engine_run(a)
    finally:
        held_gil.shim_lend_end(token)


def engine_run(a):
    # Stands for PyTorch's own _engine_run_backward (a Python function that calls the engine and waits). The frames
    # lent are those at the loan's start: the line that called engine_wait, not this one.
    stack = here(); expected[a] = stack[2:]; free_gil.shim_alloc_on_native_thread(a, 4096)


def nested_loans(a, b):
    # A loan inside a loan (reentrant checkpointing calls backward from within backward): the inner one lends while
    # it lasts, and the outer one lends again after it ends.
    outer = held_gil.shim_lend_begin()
    try:
        inner_loan(a)
        stack = here(); expected[b] = stack[1:]; free_gil.shim_alloc_on_native_thread(b, 4096)
    finally:
        held_gil.shim_lend_end(outer)


def inner_loan(a):
    token = held_gil.shim_lend_begin()
    try:
        stack = here(); expected[a] = stack[1:]; free_gil.shim_alloc_on_native_thread(a, 4096)
    finally:
        held_gil.shim_lend_end(token)


# A module that is library code by the site rule (it lives in a site-packages folder): a thread running only library
# code (PyTorch's engine running a DDP communication hook, a library's thread waiting in a collective) has no line
# of the job's own to lend.
_site_packages = tempfile.TemporaryDirectory(prefix="allocscope_pyframes_lib_")
os.mkdir(os.path.join(_site_packages.name, "site-packages"))
with open(os.path.join(_site_packages.name, "site-packages", "allocscope_test_library.py"), "w") as _f:
    _f.write("def lend_and_alloc(held, free, a):\n"
             "    token = held.shim_lend_begin()\n"
             "    try:\n"
             "        free.shim_alloc_on_native_thread(a, 4096)\n"
             "    finally:\n"
             "        held.shim_lend_end(token)\n")
sys.path.insert(0, os.path.join(_site_packages.name, "site-packages"))
import allocscope_test_library  # noqa: E402


def library_lender(a, b):
    # With the job's own loan under way, the library thread's loan lends nothing: the job's goes on lending (a). With
    # none under way, the allocation gets no Python frames at all (b), not the library's.
    outer = held_gil.shim_lend_begin()
    try:
        stack = here(); expected[a] = stack[1:]; t = threading.Thread(target=allocscope_test_library.lend_and_alloc, args=(held_gil, free_gil, a))
        t.start()
        t.join()
    finally:
        held_gil.shim_lend_end(outer)
    expected[b] = []
    t = threading.Thread(target=allocscope_test_library.lend_and_alloc, args=(held_gil, free_gil, b))
    t.start()
    t.join()


def native_thread_alone():
    # No loan: a thread that never ran Python has no Python frames.
    a = addr()
    expected[a] = []; free_gil.shim_alloc_on_native_thread(a, 4096)


def scenarios():
    nested(3, alloc_free)
    nested(5, alloc_held)
    g = generator()
    next(g)
    next(g)
    sorted([3, 1, 2], key=key_calls_back)
    t = threading.Thread(target=nested, args=(2, alloc_free))
    t.start()
    t.join()
    for i in range(40):
        dynamic_code(i)
    non_ascii_names()
    nested(4, engine_wait)
    nested(2, lambda a: nested_loans(a, addr()))
    nested(1, lambda a: library_lender(a, addr()))
    native_thread_alone()
    nested(MAX_PYTHON_FRAMES + 20, alloc_free)


def python_frames(frames):
    """The Python entries of a recorded stack (native frames name a module or a C/C++ source, never a .py)."""
    return [(f["filename"], f["line"], f["name"]) for f in frames
            if f["filename"].endswith(".py") or f["filename"].startswith("<")]


def run(path, stacks, max_frames):
    expected.clear()
    if free_gil.shim_start(path.encode(), stacks, max_frames, 0) != 0:
        raise SystemExit("shim_start failed")
    scenarios()
    if free_gil.shim_dump_and_stop() != 0:
        raise SystemExit("dump failed")
    with open(path, "rb") as f:
        snap = pickle.load(f)
    return {e["addr"]: e for e in snap["device_traces"][0] if e["action"] == "alloc"}, snap


def main():
    status = free_gil.shim_python_status().decode()
    print("python %s: %s" % (sys.version.split()[0], status))
    if not status.startswith("read from"):
        print("SKIP: this Python's frames are not read")
        return 77
    failed = 0
    checks = 0
    with tempfile.TemporaryDirectory(prefix="allocscope_pyframes_") as d:
        got, snap = run(os.path.join(d, "python.pickle"), STACKS_PYTHON, 128)
        settings = snap.get("allocator_settings", {}).get("allocscope_capture", {})
        checks += 1
        if settings.get("python_frames") != status or settings.get("stacks") != "python":
            failed += 1
            print("FAIL allocator_settings say stacks=%r python_frames=%r" % (settings.get("stacks"),
                                                                                settings.get("python_frames")))
        for a, want in expected.items():
            checks += 1
            e = got.get(a)
            have = python_frames(e["frames"]) if e else None
            want = want[:MAX_PYTHON_FRAMES]
            if have != want:
                failed += 1
                print("FAIL allocation 0x%x:\n  want %s\n  have %s" % (a, want[:6], (have or [])[:6]))
        # Interleaving: sorted() is C code between the key function and its caller, so native frames (list.sort,
        # the interpreter's call machinery) lie between those two Python frames in the recorded stack.
        for a, want in expected.items():
            if not want or want[0][2] != "key_calls_back":
                continue
            frames = got[a]["frames"]
            names = [f["name"] for f in frames]
            i, j = names.index("key_calls_back"), names.index("scenarios")
            between = [f for f in frames[i + 1:j] if not (f["filename"].endswith(".py") or f["filename"].startswith("<"))]
            checks += 1
            if not between or names.index(frames[0]["name"]) >= i:
                failed += 1
                print("FAIL the key function's frame is not inside native frames: %s" % names[:j + 1])
            else:
                print("  ok   native frames between the key function and its caller: %d (e.g. %s)" %
                      (len(between), between[0]["name"]))
        # A dump at exit (what `allocscope record` does) runs after the interpreter's and C++'s static teardown has
        # begun: a child process records, writes what it expects, and exits.
        child_out = os.path.join(d, "at_exit.pickle")
        import subprocess
        rc = subprocess.run([sys.executable, __file__, SHIM, "--child", child_out]).returncode
        checks += 1
        try:
            with open(child_out, "rb") as f:
                child = pickle.load(f)
            want_child = [tuple(x) for x in json.load(open(child_out + ".json"))]
            have_child = [python_frames(e["frames"]) for e in child["device_traces"][0] if e["action"] == "alloc"]
            child_status = child["allocator_settings"]["allocscope_capture"].get("python_frames")
            if rc != 0 or have_child != [want_child] or child_status != status:
                failed += 1
                print("FAIL dump at exit: rc %d, python_frames %r, frames %s, want %s" % (rc, child_status, have_child,
                                                                                          want_child))
            else:
                print("  ok   the dump at exit names the frames and says %r" % child_status)
        except Exception as e:  # an unreadable file is the failure this check is for
            failed += 1
            print("FAIL dump at exit: %r" % e)
        # The same job with native stacks only: no Python frame at all.
        got_native, _ = run(os.path.join(d, "native.pickle"), STACKS_NATIVE, 32)
        checks += 1
        stray = sum(len(python_frames(e["frames"])) for e in got_native.values())
        if stray:
            failed += 1
            print("FAIL --stacks native recorded %d Python frames" % stray)
    print("%d allocations compared with traceback.extract_stack(); %d checks, %d failed" % (len(expected), checks, failed))
    return 1 if failed else 0


def bench(calls=20000, depth=30, rounds=9):
    """Median over rounds that alternate the modes, so a noisy machine slows all three alike."""
    import statistics
    import time
    samples = {"none": [], "native": [], "python": []}
    with tempfile.TemporaryDirectory(prefix="allocscope_pyframes_") as d:
        for _ in range(rounds):
            for name, stacks in (("none", 0), ("native", STACKS_NATIVE), ("python", STACKS_PYTHON)):
                if free_gil.shim_start(os.path.join(d, "b.pickle").encode(), stacks, 32, 0) != 0:
                    raise SystemExit("shim_start failed")
                base = next_addr[0]

                def timed(level):
                    if level:
                        return timed(level - 1)
                    hook = free_gil.shim_alloc
                    t0 = time.perf_counter()
                    for i in range(calls):
                        hook(base + i * 4096, 4096)
                    return time.perf_counter() - t0
                samples[name].append(timed(depth) / calls * 1e9)
                free_gil.shim_dump_and_stop()
    med = {k: statistics.median(v) for k, v in samples.items()}
    print(json.dumps({"python": sys.version.split()[0], "depth": depth, "calls": calls, "rounds": rounds,
                      "ns_per_call_median": {k: round(v) for k, v in med.items()},
                      "ns_per_call_min": {k: round(min(v)) for k, v in samples.items()},
                      "python_frames_ns": round(med["python"] - med["native"]),
                      "stack_ns": round(med["python"] - med["none"])}))
    return 0


def child(out):
    free_gil.shim_start(out.encode(), STACKS_PYTHON, 128, 1)
    nested(2, alloc_free)
    json.dump(list(expected.values())[0][:MAX_PYTHON_FRAMES], open(out + ".json", "w"))
    return 0  # the library writes `out` at exit


if __name__ == "__main__":
    try:
        if "--bench" in sys.argv[2:]:
            rc = bench()
        elif "--child" in sys.argv[2:]:
            rc = child(sys.argv[sys.argv.index("--child") + 1])
        else:
            rc = main()
    finally:
        _site_packages.cleanup()
    sys.exit(rc)
