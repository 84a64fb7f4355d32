#!/usr/bin/env python3
"""One JSON line of proof for a snapshot `allocscope record` wrote (run_gpu.sh), from the snapshot and the job's
labels alone, so it runs on any machine (CPU here, on the returned files):

- share: of the bytes alive at the allocated peak (PyTorch's part of a merged file, else the capture), the share whose
  site (the one rule every answer uses, by `allocscope peak --json`) is a line of the job's own script (a gradient's
  site is its backward() line there once the capture's windows lend it);
- lent: in a merged file, PyTorch's allocations without Python frames, and how many lie in one of the capture's
  windows (allocscope_lent), read with Python's pickle, independently of our loader;
- owners: bytes by owner (`allocscope summary --json`) against the library's own counter in the label: PyTorch's
  reserved peak (the file's segments) against torch.cuda.max_memory_reserved, the owners at the peak against CuPy's
  pool total and XLA's memory_stats pool bytes;
- leak: `allocscope leaks --json`'s verdict, and whether it is right (the planted leak's line, or no leak);
- overhead: the median step of the recorded run against the bare run's (labels written by common.py).

usage: analyse.py ALLOCSCOPE SNAPSHOT [--label RECORDED.json] [--bare BARE.json] [--script NAME.py] [--job NAME]
Prints one line; a failure is a line with "error", and the exit status 0 either way (the driver goes on)."""
import argparse
import gzip
import json
import os
import pickle
import subprocess
import sys

SLACK_US = 1000  # lent_frames.h: kLentSlackUs


def answer(allocscope, verb, snapshot, *args):
    r = subprocess.run([allocscope, verb, snapshot, "--json", *args], capture_output=True, text=True, timeout=600)
    if r.returncode not in (0, 3):  # 3: `leaks` found one
        raise RuntimeError("%s %s: exit %d: %s" % (verb, snapshot, r.returncode, r.stderr.strip()[-300:]))
    return json.loads(r.stdout)


def share(allocscope, snapshot, script):
    out = []
    for d in answer(allocscope, "peak", snapshot, "--top", "100000")["devices"]:
        total = d["allocated"]["bytes"]
        mine = sum(s["bytes"] for s in d["sites"]
                   if s["site"] and os.path.basename(s["site"]["filename"]) == script)
        top_other = [(s["site"]["text"] if s["site"] else "<no frames>", s["bytes"]) for s in d["sites"]
                     if not (s["site"] and os.path.basename(s["site"]["filename"]) == script)][:3]
        out.append({"device": d["device"], "peak_allocated": total, "script_bytes": mine,
                    "script_share": round(mine / total, 4) if total else None, "largest_other_sites": top_other})
    return out


def lent_coverage(snapshot):
    """PyTorch's part of a merged file: its allocs without Python frames, and those inside a window."""
    opener = gzip.open if snapshot.endswith(".gz") else open
    with opener(snapshot, "rb") as f:
        s = pickle.load(f)
    outside = s.get("allocscope_outside")
    if outside is None:
        return None
    windows = sorted((w["start_us"] - SLACK_US, w["end_us"] + SLACK_US) for w in outside.get("allocscope_lent", []))
    kinds = {}
    for w in outside.get("allocscope_lent", []):
        kinds[w.get("kind", "")] = kinds.get(w.get("kind", ""), 0) + 1
    frameless = inside = frameless_bytes = 0
    for trace in s.get("device_traces", []):
        for e in trace:
            if e.get("action") != "alloc" or any(fr["filename"].endswith(".py") or fr["filename"].startswith("<")
                                                 for fr in e.get("frames") or []):
                continue
            frameless += 1
            frameless_bytes += e.get("size", 0)
            t = e.get("time_us", 0)
            inside += any(a <= t <= b for a, b in windows)
    return {"windows": len(windows), "kinds": kinds, "frameless_allocs": frameless,
            "frameless_bytes": frameless_bytes, "in_a_window": inside}


def owners(allocscope, snapshot, label):
    counters = {}
    if "max_memory_reserved" in label:
        counters["pytorch"] = ("torch.cuda.max_memory_reserved()", label["max_memory_reserved"])
    if "pool_total_bytes" in label:
        counters["cupy"] = ("cupy pool total_bytes()", label["pool_total_bytes"])
    stats = label.get("memory_stats") or {}
    if "pool_bytes" in stats or "bytes_reserved" in stats:
        key = "pool_bytes" if "pool_bytes" in stats else "bytes_reserved"
        counters["xla"] = ("jax memory_stats()['%s']" % key, stats[key])
    summary = answer(allocscope, "summary", snapshot)
    out = []
    for d in summary["devices"]:
        by = {o["owner"]: o["bytes"] for o in d.get("owners_at_peak", [])}
        row = {"device": d["device"], "by_owner": by, "against": {}}
        for owner, (what, value) in counters.items():
            ours = by.get(owner, 0)
            # PyTorch's counter is the most it ever reserved, which can come after the allocated peak (gpt_ckpt:
            # 132 MiB later). In a merged file (`outside` holds the capture's memory outside PyTorch) the segments are
            # PyTorch's own: their peak is the number to compare. A capture alone has every owner's in its segments.
            if owner == "pytorch" and "outside" in d and d.get("reserved_known"):
                ours = d["peak_reserved"]["bytes"]
            row["against"][owner] = {"ours": ours, what: value, "equal": ours == value,
                                     "diff_mib": round((ours - value) / 2 ** 20, 2)}
        out.append(row)
    return out, summary.get("warnings", [])


def leak(allocscope, snapshot, label):
    planted = label.get("leak_line")
    out = []
    for d in answer(allocscope, "leaks", snapshot)["devices"]:
        top = d["growing"][0] if d["growing"] else None
        pool = d.get("pools_growing") or []
        pool_site = pool[0]["sites"][0] if pool and pool[0]["sites"] else None
        site = (top or pool_site or {}).get("site") or {}
        verdict = ("leak" if d["leak_suspected"] else "pool growth" if d.get("pool_growth_suspected")
                   else "not judged" if not d["judged"] else "no leak")
        right = (verdict in ("leak", "pool growth") and site.get("line") == planted) if planted else verdict == "no leak"
        out.append({"device": d["device"], "verdict": verdict, "pools_judged": d.get("pools_judged"),
                    "site": site.get("text"), "planted_line": planted,
                    "right": right, "iterations": len(d["iterations"]["boundaries"]),
                    "iterations_from": d["iterations"]["source"]})
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("allocscope")
    p.add_argument("snapshot")
    p.add_argument("--label")
    p.add_argument("--bare")
    p.add_argument("--script")
    p.add_argument("--job")
    a = p.parse_args()
    row = {"job": a.job, "snapshot": os.path.basename(a.snapshot)}
    try:
        label = json.load(open(a.label)) if a.label and os.path.exists(a.label) else {}
        if a.label and not label:
            row["label_missing"] = a.label
        row["job"] = row["job"] or label.get("job")
        script = a.script or label.get("script")
        row["share"] = share(a.allocscope, a.snapshot, script) if script else None
        row["lent"] = lent_coverage(a.snapshot)
        row["owners"], row["warnings"] = owners(a.allocscope, a.snapshot, label)
        row["leak"] = leak(a.allocscope, a.snapshot, label)
        bare = json.load(open(a.bare)) if a.bare and os.path.exists(a.bare) else {}
        rec, base = label.get("median_step_ms"), bare.get("median_step_ms")
        row["overhead"] = {"recorded_median_step_ms": rec, "bare_median_step_ms": base,
                           "ratio": round(rec / base, 3) if rec and base else None}
    except Exception as e:  # one line per job, whatever happened
        row["error"] = "%s: %s" % (type(e).__name__, e)
    print(json.dumps(row))


if __name__ == "__main__":
    sys.exit(main())
