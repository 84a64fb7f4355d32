# A small PyTorch training job for the owners check: linear layers (cuBLAS), a convolution (cuDNN), AdamW, a few
# steps. Writes PyTorch's own counters at the end to LABEL (JSON): the oracle for the bytes our capture says
# PyTorch's caching allocator holds. usage: python3 torch_job.py LABEL.json
import json, sys
import torch


def make_model(dev):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
        torch.nn.Linear(32 * 32 * 32, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)).to(dev)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3)


def train_step(model, opt, dev):
    x = torch.randn(64, 3, 32, 32, device=dev)
    y = torch.randint(0, 10, (64,), device=dev)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


if __name__ == "__main__":
    dev = torch.device("cuda")
    model, opt = make_model(dev)
    for step in range(6):
        train_step(model, opt, dev)
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    label = {"job": "torch", "memory_reserved": torch.cuda.memory_reserved(),
             "max_memory_reserved": torch.cuda.max_memory_reserved(), "memory_allocated": torch.cuda.memory_allocated(),
             "num_alloc_retries": torch.cuda.memory_stats()["num_alloc_retries"], "device_total": total,
             "device_free": free, "torch": torch.__version__}
    json.dump(label, open(sys.argv[1], "w"), indent=1)
    print(label)
