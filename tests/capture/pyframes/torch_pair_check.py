#!/usr/bin/env python3
"""On the GPU machine, after `allocscope record -o DIR/NAME.pickle.gz -- python3 JOB LABEL`: the bootstrap wrote
PyTorch's own snapshot DIR/NAME.torch.pickle. Checks it against PyTorch's counters (LABEL) and the capture:
PyTorch's segments at exit total memory_reserved(); the capture's PyTorch-owned bytes at exit are the same segments
(same addresses); the snapshot has a trace with Python frames; PyTorch's _memory_viz reads it.
usage: torch_pair_check.py ALLOCSCOPE CAPTURE.pickle.gz TORCH.pickle LABEL.json  -> JSON line, exit 1 on a mismatch"""
import gzip
import io
import json
import pickle
import subprocess
import sys

allocscope, capture_path, torch_path, label_path = sys.argv[1:5]
label = json.load(open(label_path))
snap = pickle.load(open(torch_path, "rb"))
cap = pickle.load(gzip.open(capture_path))
torch_segments = {(s["device"], s["address"]): s["total_size"] for s in snap["segments"]}
cap_segments = {(s["device"], s["address"]): s["total_size"] for s in cap["segments"]}
trace = [e for t in snap["device_traces"] for e in t]
py_frames = sum(1 for e in trace if any(f["filename"].endswith(".py") for f in e.get("frames", [])))
out = {
    "torch_segments_bytes": sum(torch_segments.values()),
    "memory_reserved": label.get("memory_reserved"),
    "torch_segments_in_capture": sum(1 for k, v in torch_segments.items() if cap_segments.get(k) == v),
    "torch_segments": len(torch_segments),
    "capture_segments": len(cap_segments),
    "trace_entries": len(trace),
    "entries_with_python_frames": py_frames,
    "actions": sorted({e["action"] for e in trace}),
}
try:
    from torch.cuda import _memory_viz
    buf = io.StringIO()
    out["memory_viz_segsum_chars"] = len(_memory_viz.segsum(snap))
    out["memory_viz_trace_plot_chars"] = len(_memory_viz.trace_plot(snap))
except Exception as e:
    out["memory_viz_error"] = repr(e)
summary = subprocess.run([allocscope, "summary", torch_path, "--json"], capture_output=True, text=True)
out["allocscope_summary_rc"] = summary.returncode
ok = (out["torch_segments_bytes"] == out["memory_reserved"] and out["torch_segments_in_capture"] == len(torch_segments)
      and py_frames > 0 and "memory_viz_error" not in out and summary.returncode == 0)
out["ok"] = ok
print(json.dumps(out))
sys.exit(0 if ok else 1)
