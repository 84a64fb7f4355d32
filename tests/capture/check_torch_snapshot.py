"""Checks a snapshot captured from torch_train_step.py: every segment PyTorch reports is there with its size and its
segment_alloc is in the trace; the freed 300 MiB segment appears as segment_alloc + segment_free.
With --expandable (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True) PyTorch grows segments with cuMemMap: then the
mapped pieces must add up to what PyTorch reports reserved, and come as segment_map in the trace.
usage: check_torch_snapshot.py CAPTURED.pickle FACTS.json [--expandable]"""
import collections
import json
import pickle
import sys

snap = pickle.load(open(sys.argv[1], "rb"))
facts = json.load(open(sys.argv[2]))
ours = {s["address"]: s["total_size"] for s in snap["segments"]}
trace = [e for dev in snap["device_traces"] for e in dev]
actions = collections.Counter(e["action"] for e in trace)
seg_alloc = {e["addr"]: e["size"] for e in trace if e["action"] == "segment_alloc"}
print("captured actions:", dict(actions))
print("captured segments:", len(ours), "torch segments:", len(facts["segments"]))
if "--expandable" in sys.argv:
    maps = [e for e in trace if e["action"] == "segment_map"]
    mapped = sum(s["total_size"] for s in snap["segments"] if s["is_expandable"])
    print("segment_map events:", len(maps), "mapped bytes live:", mapped, "torch reserved:", facts["reserved"])
    assert maps, "no segment_map events"
    assert mapped == facts["reserved"], (mapped, facts["reserved"])
    print("OK")
    sys.exit(0)
missing = [(a, s) for a, s in facts["segments"] if ours.get(a) != s]
assert not missing, f"torch segments missing from the capture: {missing}"
not_traced = [a for a, _ in facts["segments"] if a not in seg_alloc]
assert not not_traced, f"segments without segment_alloc in the trace: {not_traced}"
big = [e for e in trace if e["action"] == "segment_free" and e["size"] >= 300 << 20]
assert big, "the freed 300 MiB segment is missing"
frames = [f["name"] for e in trace if e["action"] == "segment_alloc" for f in e.get("frames", [])]
print("sample frames of a segment_alloc:", frames[:8])
nvtx = [a["name"] for a in snap.get("external_annotations", [])]
print("external_annotations (NVTX):", nvtx[:8], "..." if len(nvtx) > 8 else "")
print("user_metadata sample:", next((e.get("user_metadata") for e in trace if e.get("user_metadata")), None))
print("OK")
