# A DDP training job on the NCCL backend (one rank: the machines lent so far have one GPU, and NCCL refuses two ranks
# on one device), so NCCL's own buffers, which PyTorch never reports, are in the capture beside PyTorch's pool.
# Writes PyTorch's counters to LABEL (JSON). usage: python3 nccl_job.py LABEL.json
import json, os, sys
import torch
import torch.distributed as dist

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29533")
dist.init_process_group("nccl", rank=0, world_size=1)
dev = torch.device("cuda", 0)
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(
    torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1000)).to(dev))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(4):
    x = torch.randn(256, 4096, device=dev)
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
t = torch.ones(16 << 20, device=dev)
dist.all_reduce(t)
torch.cuda.synchronize()
label = {"job": "nccl", "memory_reserved": torch.cuda.memory_reserved(), "memory_allocated": torch.cuda.memory_allocated(),
         "nccl_version": ".".join(map(str, torch.cuda.nccl.version())), "torch": torch.__version__}
json.dump(label, open(sys.argv[1], "w"), indent=1)
print(label)
dist.destroy_process_group()
