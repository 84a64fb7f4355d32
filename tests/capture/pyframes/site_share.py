#!/usr/bin/env python3
"""Of the device bytes alive at the allocated peak of a capture, the share whose site (the one rule every answer uses:
the innermost frame of the user's own code) is a line of the job's own script, by `allocscope peak --json`.
Allocations made by the autograd engine's threads run no Python at all (their site reads "backward: Node"), so the
share is also given over the bytes allocated from threads that run Python.
usage: site_share.py ALLOCSCOPE SNAPSHOT SCRIPT_NAME  -> one JSON line"""
import json
import subprocess
import sys

allocscope, snapshot, script = sys.argv[1:4]
peak = json.loads(subprocess.run([allocscope, "peak", snapshot, "--json", "--top", "100000"], check=True,
                                 capture_output=True, text=True).stdout)
out = {"snapshot": snapshot, "script": script, "devices": []}
for d in peak["devices"]:
    total = d["allocated"]["bytes"]
    by = {"script": 0, "other_python": 0, "backward_engine": 0, "native": 0}
    top_other = []
    for s in d["sites"]:
        site, b = s["site"] or {"filename": "", "text": "<no frames>"}, s["bytes"]
        if site["filename"].endswith("/" + script) or site["filename"] == script:
            by["script"] += b
        elif site["filename"].endswith(".py"):
            by["other_python"] += b
            top_other.append(site["text"])
        elif site["text"].startswith("backward:"):
            by["backward_engine"] += b
        else:
            by["native"] += b
            top_other.append(site["text"])
    python_threads = total - by["backward_engine"]
    out["devices"].append({"device": d["device"], "peak_allocated": total, "bytes_by_site_kind": by,
                           "script_share": round(by["script"] / total, 4) if total else None,
                           "script_share_of_python_threads": round(by["script"] / python_threads, 4) if python_threads else None,
                           "other_sites": top_other[:5]})
print(json.dumps(out))
