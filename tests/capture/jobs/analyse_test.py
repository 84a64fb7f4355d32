#!/usr/bin/env python3
"""analyse.py (the GPU proof's analysis) on snapshots GPU jobs wrote before (tests/fixtures), against what is known of
them: the merged PyTorch job of capture_merged (no windows then: 73 frameless allocations, none in a window, 77.3%
of its peak bytes at torch_job.py's lines; PyTorch's bytes equal its max_memory_reserved), and CuPy's and JAX's
captures of capture_python (their pools equal the libraries' counters; every peak byte at the job's lines).
usage: analyse_test.py ALLOCSCOPE FIXTURES"""
import json
import os
import subprocess
import sys

allocscope, fixtures = sys.argv[1:3]
here = os.path.dirname(os.path.abspath(__file__))
failed = 0


def check(cond, what):
    global failed
    print(("  ok   " if cond else "  FAIL ") + what)
    failed += 0 if cond else 1


def analyse(name, script):
    base = os.path.join(fixtures, name)
    out = subprocess.run([sys.executable, os.path.join(here, "analyse.py"), allocscope, base + ".pickle.gz",
                          "--label", base + ".label.json", "--script", script, "--bare", "/nonexistent.json"],
                         capture_output=True, text=True, check=True).stdout
    lines = out.strip().splitlines()
    check(len(lines) == 1, "%s: one line" % name)
    return json.loads(lines[-1])


m = analyse("capture_merged/torch", "torch_job.py")
check("error" not in m, "merged torch: no error (%s)" % m.get("error"))
check(m["lent"] == {"windows": 0, "kinds": {}, "frameless_allocs": 73, "frameless_bytes": 942992624,
                    "in_a_window": 0}, "merged torch: 73 frameless allocations, no window (%s)" % m["lent"])
check(m["share"][0]["script_share"] == 0.7733, "merged torch: 77.33%% at the job's lines (%s)" % m["share"][0])
check(m["owners"][0]["against"]["pytorch"]["equal"], "merged torch: PyTorch's bytes = max_memory_reserved()")
check(m["leak"][0]["verdict"] == "no leak" and m["leak"][0]["right"], "merged torch: no leak, right")
check(m["overhead"]["ratio"] is None, "no bare run: no ratio")
for job, owner in (("cupy", "cupy"), ("jax", "xla")):
    r = analyse("capture_python/" + job, job + "_job.py")
    check(r["lent"] is None, "%s: a capture, not a merged file" % job)
    check(r["owners"][0]["against"][owner]["equal"], "%s: %s's bytes = the library's counter (%s)"
          % (job, owner, r["owners"][0]["against"]))
    check(r["share"][0]["script_share"] == 1.0, "%s: every peak byte at the job's lines" % job)
# issue 39's proof, recorded on an H200 by run_gpu.sh (tests/fixtures/capture_proof, README there): in the default
# (merged) mode every peak byte is at a line of the job's script, every frameless allocation falls in a window, each
# pool equals its library's counter, and the planted leak is found at its line.
def proof(job, script):
    base = os.path.join(fixtures, "capture_proof", job)
    out = subprocess.run([sys.executable, os.path.join(here, "analyse.py"), allocscope, base + ".pickle.gz", "--job", job,
                          "--label", base + ".label.json", "--script", script, "--bare", base + ".bare.json"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


for job, script, owner in (("hf_gpt2", "hf_gpt2.py", "pytorch"), ("lightning_timm", "lightning_timm.py", "pytorch"),
                           ("gpt_ckpt_leak", "gpt_ckpt.py", "pytorch"), ("jax_mlp", "jax_mlp.py", "xla"),
                           ("cupy_fft", "cupy_fft.py", "cupy")):
    r = proof(job, script)
    check(all(sh["script_share"] >= 0.95 for sh in r["share"]), "%s: at least 95%% of peak bytes at its lines (%s)"
          % (job, [sh["script_share"] for sh in r["share"]]))
    if r["lent"]:
        check(r["lent"]["in_a_window"] == r["lent"]["frameless_allocs"] > 0,
              "%s: every frameless allocation in a window (%s)" % (job, r["lent"]))
    check(r["owners"][0]["against"][owner]["equal"], "%s: %s's bytes = its counter (%s)"
          % (job, owner, r["owners"][0]["against"]))
r = proof("gpt_ckpt_leak", "gpt_ckpt.py")
check(r["leak"][0]["verdict"] == "leak" and r["leak"][0]["right"], "gpt_ckpt_leak: the planted leak at its line (%s)"
      % r["leak"][0])
for job in ("hf_gpt2", "lightning_timm"):
    r = proof(job, job + ".py")
    check(r["leak"][0]["verdict"] == "no leak", "%s: no leak (%s)" % (job, r["leak"][0]))
print("%d failed" % failed)
sys.exit(1 if failed else 0)
