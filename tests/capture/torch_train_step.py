"""A small PyTorch training step, run under `allocscope record` on the GPU machine (see docs/capture.md).

Writes PyTorch's own view of its segments (torch.cuda.memory_snapshot) to argv[1], so the checker can require every
one of them in the captured snapshot. NVTX ranges mark the step, to see them come back as external_annotations.
"""
import json
import sys

import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)).cuda()
opt = torch.optim.AdamW(model.parameters())
for step in range(3):
    torch.cuda.nvtx.range_push(f"train_step_{step}")
    x = torch.randn(512, 1024, device="cuda")
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    torch.cuda.nvtx.range_pop()
# A large temporary so a fresh segment is allocated and freed back (empty_cache) inside the recording.
big = torch.empty(300 << 20, dtype=torch.uint8, device="cuda")
del big
torch.cuda.synchronize()
torch.cuda.empty_cache()
segments = [(s["address"], s["total_size"]) for s in torch.cuda.memory_snapshot()]
json.dump({"segments": segments, "reserved": torch.cuda.memory_reserved()}, open(sys.argv[1], "w"))
print(f"torch: {len(segments)} segments, {torch.cuda.memory_reserved()} bytes reserved")
