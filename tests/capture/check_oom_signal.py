"""Checks torch_oom_signal.py's two snapshots: the signal dump holds the 64 MiB segment and no oom; the OOM dump
holds an `oom` entry for the 1 PiB request with device_free set.  usage: check_oom_signal.py OUTPUT_PATH"""
import pickle
import sys

sig = pickle.load(open(sys.argv[1] + ".signal", "rb"))
oom = pickle.load(open(sys.argv[1], "rb"))
sig_trace = [e for d in sig["device_traces"] for e in d]
oom_trace = [e for d in oom["device_traces"] for e in d]
assert any(e["action"] == "segment_alloc" and e["size"] >= 64 << 20 for e in sig_trace)
assert not any(e["action"] == "oom" for e in sig_trace)
ooms = [e for e in oom_trace if e["action"] == "oom"]
assert ooms and all(e["size"] >= 1 << 50 and e["device_free"] > 0 for e in ooms), ooms
print("signal dump:", len(sig_trace), "events; OOM dump:", len(oom_trace), "events,", len(ooms), "oom entries,",
      "device_free", ooms[0]["device_free"], "frames", [f["name"][:50] for f in ooms[0]["frames"][:6]])
print("OK")
