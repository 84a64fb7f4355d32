# Per-iteration cost of capture on a PyTorch training loop: 60 steps of the owners job's model (torch_job.py), each
# timed after a synchronize; prints the median and p90 of the last 50 (warm-up excluded) as JSON. Run bare and under
# `allocscope record`. usage: python3 torch_overhead.py [OUT.json]
import json, os, statistics, sys, time
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_job import make_model, train_step

dev = torch.device("cuda")
model, opt = make_model(dev)
times = []
for step in range(60):
    t = time.perf_counter()
    train_step(model, opt, dev)
    torch.cuda.synchronize()
    times.append(time.perf_counter() - t)
last = sorted(times[10:])
out = {"median_ms": 1e3 * statistics.median(last), "p90_ms": 1e3 * last[int(0.9 * len(last))], "steps": len(last)}
print(json.dumps(out))
if len(sys.argv) > 1:
    json.dump(out, open(sys.argv[1], "w"))
