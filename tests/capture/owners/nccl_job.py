# A DDP training job on the NCCL backend: one rank alone, or each rank of a torchrun launch (RANK, WORLD_SIZE,
# LOCAL_RANK). NCCL's buffers, which PyTorch never reports, are in the capture beside PyTorch's pool. Writes
# PyTorch's counters to LABEL (JSON, %r = rank). Lines 13 and 19 are named by recorded fixtures: keep them there.
import json, os, statistics, sys, time
import torch
import torch.distributed as dist
env = lambda name, default: int(os.environ.get(name, default))  # noqa: E731 (set by the launcher)
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29533")
dist.init_process_group("nccl", rank=env("RANK", 0), world_size=env("WORLD_SIZE", 1))
dev = torch.device("cuda", env("LOCAL_RANK", 0)); torch.cuda.set_device(dev); free0 = torch.cuda.mem_get_info()[0]
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(
    torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1000)).to(dev))
opt = torch.optim.SGD(model.parameters(), lr=0.01); steps = [time.perf_counter()]
for step in range(env("STEPS", 4)):
    x = torch.randn(256, 4096, device=dev)
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True); torch.cuda.synchronize(); steps.append(time.perf_counter())
t = torch.ones(16 << 20, device=dev)
dist.all_reduce(t)
torch.cuda.synchronize()
step_ms = sorted(1e3 * (b - a) for a, b in zip(steps[1:], steps[2:]))  # the first step (warm-up) left out
label = {"job": "nccl", "rank": dist.get_rank(), "world_size": dist.get_world_size(), "device": dev.index,
         "memory_reserved": torch.cuda.memory_reserved(), "memory_allocated": torch.cuda.memory_allocated(),
         # cudaMemGetInfo's used bytes since the context existed: every library's allocations, plus module code
         # loaded lazily, so an upper bound on the capture's total, not an equality.
         "device_used_since_start": free0 - torch.cuda.mem_get_info()[0],
         "all_reduce_sum": t[0].item(), "step_ms_median": statistics.median(step_ms) if step_ms else None,
         "steps": len(step_ms), "nccl_version": ".".join(map(str, torch.cuda.nccl.version())), "torch": torch.__version__}
json.dump(label, open(sys.argv[1].replace("%r", str(dist.get_rank())), "w"), indent=1)
print(json.dumps(label))
dist.destroy_process_group()
