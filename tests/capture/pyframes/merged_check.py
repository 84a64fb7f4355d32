#!/usr/bin/env python3
"""On the GPU machine, after `ALLOCSCOPE_KEEP_TORCH_SNAPSHOT=1 allocscope record -o DIR/NAME.pickle -- python3 JOB
LABEL`: DIR/NAME.pickle is the merged snapshot and DIR/NAME.torch.pickle PyTorch's own. Checks, with PyTorch's own
tools as the oracle: the merged dict without `allocscope_outside` is PyTorch's dict; `python -m
torch.cuda._memory_viz` prints the same stats and trace for both files and draws both; PyTorch's segments total its
memory_reserved() (LABEL); the outside part holds the capture's non-PyTorch memory; `allocscope summary` reads it.
usage: merged_check.py ALLOCSCOPE MERGED.pickle TORCH.pickle LABEL.json  -> JSON line, exit 1 on a mismatch"""
import json
import pickle
import subprocess
import sys

allocscope, merged_path, torch_path, label_path = sys.argv[1:5]
label = json.load(open(label_path)) if label_path != "-" else {}
merged = pickle.load(open(merged_path, "rb"))
torch_snap = pickle.load(open(torch_path, "rb"))
outside = merged.pop("allocscope_outside", None)
out = {"pytorch_part_equal": merged == torch_snap, "has_outside": outside is not None}
if outside is not None:
    out["outside_segments_bytes"] = sum(s["total_size"] for s in outside["segments"])
    out["outside_trace_entries"] = sum(len(t) for t in outside["device_traces"])
    out["outside_is_capture"] = "allocscope_capture" in outside.get("allocator_settings", {})
out["torch_segments_bytes"] = sum(s["total_size"] for s in torch_snap["segments"])
out["memory_reserved"] = label.get("memory_reserved")


def viz(verb, path):
    r = subprocess.run([sys.executable, "-m", "torch.cuda._memory_viz", verb, path] +
                       (["-o", path + "." + verb + ".html"] if verb.endswith("plot") else []),
                       capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr[-300:]


for verb in ("stats", "trace"):
    a, b = viz(verb, merged_path), viz(verb, torch_path)
    out["memory_viz_" + verb + "_same"] = a == b and a[0] == 0
    if a[0] != 0:
        out["memory_viz_" + verb + "_error"] = a[2]
for verb in ("trace_plot", "segment_plot"):
    rc, _, err = viz(verb, merged_path)
    out["memory_viz_" + verb + "_rc"] = rc
summary = subprocess.run([allocscope, "summary", merged_path, "--json"], capture_output=True, text=True)
out["allocscope_summary_rc"] = summary.returncode
if summary.returncode == 0:
    d = json.loads(summary.stdout)["devices"]
    out["owners_at_peak"] = {o["owner"]: o["bytes"] for dev in d for o in dev.get("owners_at_peak", [])}
    out["outside"] = [dev.get("outside") for dev in d]
ok = (out["pytorch_part_equal"] and out["has_outside"] and out.get("outside_is_capture", False)
      and out["memory_viz_stats_same"] and out["memory_viz_trace_same"]
      and out["memory_viz_trace_plot_rc"] == 0 and out["memory_viz_segment_plot_rc"] == 0
      and summary.returncode == 0
      and (out["memory_reserved"] is None or out["torch_segments_bytes"] == out["memory_reserved"]))
out["ok"] = bool(ok)
print(json.dumps(out))
sys.exit(0 if ok else 1)
