"""A PyTorch loop with the caching allocator off (PYTORCH_NO_CUDA_MEMORY_CACHING=1), so every tensor is a cudaMalloc
and cudaFree: a stress test of the capture on a real framework (deep, varied native stacks). Prints the loop's time;
run it bare and under `allocscope record` to compare, and read the dump time from the capture's stderr line.
usage: PYTORCH_NO_CUDA_MEMORY_CACHING=1 torch_many_events.py STEPS"""
import os
import sys
import time

import torch

assert os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING") == "1", "set PYTORCH_NO_CUDA_MEMORY_CACHING=1"
torch.manual_seed(0)
model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.GELU()) for _ in range(6)]).cuda()
opt = torch.optim.AdamW(model.parameters())
x = torch.randn(64, 256, device="cuda")
for _ in range(5):  # warm-up (cuBLAS handles, kernels)
    model(x).sum().backward()
torch.cuda.synchronize()
t0 = time.perf_counter()
for step in range(int(sys.argv[1])):
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
torch.cuda.synchronize()
print(f"{sys.argv[1]} steps in {time.perf_counter() - t0:.3f} s", flush=True)
