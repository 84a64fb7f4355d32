#!/usr/bin/env python3
"""The default (merged) mode of a PyTorch job, end to end on the CPU: a real interpreter lends its frames around a
"backward" as the bootstrap does (allocscope_capture_python_lend_begin_for, through python_shim.cpp), a thread that
never ran Python allocates meanwhile, PyTorch's own snapshot is written with Python's pickle in PyTorch 2.11's layout
(its engine-thread entries without frames, as PyTorch records them), and the capture merges it
(allocscope_capture_dump_merged). Checked: PyTorch's part of the merged file is PyTorch's bytes, the capture's window
carries the frames Python's traceback gives for the backward() line, and `allocscope peak` (the one site rule) puts
the engine's block at that line, while a frameless block made after the backward stays "<no frames>".

usage: lent_windows_test.py PATH/TO/liballocscope_python_shim.so PATH/TO/allocscope
Exit 0 all agree, 1 a disagreement, 77 this Python's frames are not read (skip)."""
import ctypes
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
import traceback

SHIM, ALLOCSCOPE = sys.argv[1], sys.argv[2]
lib = ctypes.CDLL(SHIM)  # calls release the GIL, as the bootstrap's do
lib.shim_start.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_int]
lib.shim_alloc.argtypes = [ctypes.c_uint64, ctypes.c_uint64]
lib.shim_alloc_on_native_thread.argtypes = [ctypes.c_uint64, ctypes.c_uint64]
lib.shim_lend_begin_for.argtypes = [ctypes.c_char_p]
lib.shim_lend_end.argtypes = [ctypes.c_int]
lib.shim_dump_merged.argtypes = [ctypes.c_char_p, ctypes.c_int]
lib.shim_last_error.restype = ctypes.c_char_p
lib.shim_python_status.restype = ctypes.c_char_p
STACKS_PYTHON = 2
failed = 0


def check(cond, what):
    global failed
    print(("  ok   " if cond else "  FAIL ") + what)
    failed += 0 if cond else 1


def now_us():
    return time.time_ns() // 1000  # CLOCK_REALTIME, as both recorders stamp


SEGMENT, GRAD, AFTER = 0x7A0000000000, 0x7A0000000000, 0x7A0000100000
stamps = {}
expected = []


def engine_run_backward():
    """Stands for torch.autograd.graph._engine_run_backward: PyTorch's engine allocates on its own threads."""
    time.sleep(0.002)
    lib.shim_alloc_on_native_thread(0x7B0000000000, 4 << 20)  # the capture's own view of an engine-thread cudaMalloc
    stamps["grad"] = now_us()  # when PyTorch's engine takes the gradient's block from its pool
    time.sleep(0.002)


def lent(fn, call):
    """The bootstrap's wrapper (sitecustomize.py, _lender): its own frame is left out of the loan."""
    token = lib.shim_lend_begin_for(call)
    try:
        return fn()
    finally:
        lib.shim_lend_end(token)


def train_step():
    expected.extend((f.filename, f.lineno, f.name) for f in reversed(traceback.extract_stack())); lent(engine_run_backward, b"backward")


def frame(name, filename, line):
    return {"name": name, "filename": filename, "line": line}


def pytorch_snapshot(path):
    """PyTorch 2.11's layout (torch.cuda.memory._dump_snapshot): a 2 MiB segment of its pool, the gradient's block
    allocated by the engine (no frames) and one allocated after backward by a thread without Python (no frames)."""
    fwd = [frame("forward", os.path.abspath(__file__), 12)]

    def entry(action, addr, size, t, frames):
        return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t, "compile_context": "N/A",
                "user_metadata": "", "frames": frames}
    trace = [entry("segment_alloc", SEGMENT, 2 << 20, stamps["segment"], fwd),
             entry("alloc", GRAD, 1 << 20, stamps["grad"], []),
             entry("alloc", AFTER, 1 << 20, stamps["after"], [])]
    block = lambda addr, frames: {"address": addr, "size": 1 << 20, "requested_size": 1 << 20,
                                  "state": "active_allocated", "frames": frames}
    snap = {"segments": [{"device": 0, "address": SEGMENT, "total_size": 2 << 20, "allocated_size": 2 << 20,
                          "active_size": 2 << 20, "requested_size": 2 << 20, "stream": 0, "segment_type": "large",
                          "segment_pool_id": (0, 0), "is_expandable": False,
                          "blocks": [block(GRAD, []), block(AFTER, [])], "frames": fwd}],
            "device_traces": [trace],
            "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
                                   "garbage_collection_threshold": 0.0, "expandable_segments": False},
            "external_annotations": []}
    with open(path, "wb") as f:
        pickle.dump(snap, f)
    return snap


with tempfile.TemporaryDirectory(prefix="allocscope_lent_") as d:
    out, torch_file = os.path.join(d, "job.pickle"), os.path.join(d, "job.torch.pickle")
    if lib.shim_start(out.encode(), STACKS_PYTHON, 32, 0) != 0:
        print("FAIL: start: " + lib.shim_last_error().decode())
        sys.exit(1)
    status = lib.shim_python_status().decode()
    if not status.startswith("read from"):
        print("SKIP: " + status)
        sys.exit(77)
    lib.shim_alloc(SEGMENT, 2 << 20)  # PyTorch's cudaMalloc of its segment, as the capture sees it
    stamps["segment"] = now_us()
    train_step()
    time.sleep(0.01)  # well past the window and its slack
    stamps["after"] = now_us()
    snap = pytorch_snapshot(torch_file)
    rc = lib.shim_dump_merged(torch_file.encode(), 1)
    check(rc == 0, "merged (%s)" % (lib.shim_last_error().decode() if rc else "0"))
    lib.shim_stop()
    if rc:
        sys.exit(1)
    torch_bytes, merged_bytes = open(torch_file, "rb").read(), open(out, "rb").read()
    check(merged_bytes.startswith(torch_bytes[:-1]), "PyTorch's part of the merged file is PyTorch's own bytes")
    merged = pickle.loads(merged_bytes)
    outside = merged.pop("allocscope_outside", None)
    check(merged == snap, "and reads back, without our key, as PyTorch's dict")
    windows = (outside or {}).get("allocscope_lent", [])
    check(len(windows) == 1 and windows[0]["kind"] == "backward", "the capture kept one window, 'backward' (%d)"
          % len(windows))
    if windows:
        w = windows[0]
        check(w["start_us"] <= stamps["grad"] <= w["end_us"] < stamps["after"],
              "it spans the engine's allocation and ends before the next one")
        got = [(f["filename"], f["line"], f["name"]) for f in w["stack"]]
        # Python's own answer at the call, innermost first: train_step's line, then its callers.
        want = expected
        check(got == want[: len(got)] and got and got[0][2] == "train_step",
              "its frames are Python's traceback of the backward() line (%s vs %s)" % (got[:2], want[:2]))
    peak = json.loads(subprocess.run([ALLOCSCOPE, "peak", out, "--json", "--top", "100"], capture_output=True,
                                     text=True, check=True).stdout)
    sites = {s["site"]["text"] if s["site"] else "<no frames>": s["bytes"] for s in peak["devices"][0]["sites"]}
    line = expected[0][1] if expected else -1
    want_site = "lent_windows_test.py:%d:train_step" % line
    check(sites.get(want_site) == 1 << 20, "`peak` puts the engine's block at the backward() line %s (%s)"
          % (want_site, sites))
    check(sites.get("<no frames>") == 1 << 20, "and the block made outside any window keeps no frames")
    summary = subprocess.run([ALLOCSCOPE, "summary", out], capture_output=True, text=True).stdout
    check("no PyTorch tensors" not in summary and "lent window" not in summary,
          "`summary` warns of nothing missing in a merged file")
print("%d failed" % failed)
sys.exit(1 if failed else 0)
