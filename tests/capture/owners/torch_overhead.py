# Per-iteration cost of capture on a PyTorch training loop: 60 steps of the owners job's model, each timed after a
# synchronize; prints the median and p90 of the last 50 (warm-up excluded) as JSON. Run bare and under
# `allocscope record`. usage: python3 torch_overhead.py [OUT.json]
import json, statistics, sys, time
import torch

torch.manual_seed(0)
dev = torch.device("cuda")
model = torch.nn.Sequential(
    torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
    torch.nn.Linear(32 * 32 * 32, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
times = []
for step in range(60):
    t = time.perf_counter()
    x = torch.randn(64, 3, 32, 32, device=dev)
    y = torch.randint(0, 10, (64,), device=dev)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    times.append(time.perf_counter() - t)
last = sorted(times[10:])
out = {"median_ms": 1e3 * statistics.median(last), "p90_ms": 1e3 * last[int(0.9 * len(last))], "steps": len(last)}
print(json.dumps(out))
if len(sys.argv) > 1:
    json.dump(out, open(sys.argv[1], "w"))
