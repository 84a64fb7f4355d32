# Proof jobs 3 and 4: a small GPT whose blocks are checkpointed (recomputed in backward), fed by a DataLoader with
# worker processes and pinned memory, while a Python thread keeps an exponential moving average of the weights on the
# GPU. `--leak` plants a leak at the line marked below: each step keeps a 16 MiB tensor alive.
# usage: python3 gpt_ckpt.py LABEL.json [--leak]
import os, sys, threading
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Label, marked_line, torch_counters

LEAK = "--leak" in sys.argv
label = Label("gpt_ckpt_leak" if LEAK else "gpt_ckpt", __file__, torch.cuda.synchronize)
V, D, T, B = 8192, 512, 256, 16


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.attn = nn.MultiheadAttention(D, 8, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.blocks = nn.ModuleList(Block() for _ in range(6))
        self.head = nn.Linear(D, V)

    def forward(self, idx):
        x = self.emb(idx)
        for b in self.blocks:
            x = checkpoint(b, x, use_reentrant=False)
        return self.head(x)


class Tokens(torch.utils.data.Dataset):
    def __len__(self):
        return 10_000

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.randint(0, V, (T + 1,), generator=g)


def ema_loop(model, ema, lock, stop):
    """A Python thread beside the training loop: the EMA of the weights, on the GPU."""
    while not stop.wait(0.01):
        with lock, torch.no_grad():
            for e, p in zip(ema, model.parameters()):
                e.mul_(0.99).add_(p.detach(), alpha=0.01)


if __name__ == "__main__":
    torch.manual_seed(0)
    model = GPT().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    ema = [p.detach().clone() for p in model.parameters()]
    lock, stop = threading.Lock(), threading.Event()
    thread = threading.Thread(target=ema_loop, args=(model, ema, lock, stop), daemon=True)
    thread.start()
    loader = torch.utils.data.DataLoader(Tokens(), batch_size=B, num_workers=2, pin_memory=True)
    kept = []
    for step, batch in enumerate(loader):
        if step == 24:
            break
        label.step_start()
        batch = batch.cuda(non_blocking=True)
        logits = model(batch[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, V), batch[:, 1:].reshape(-1))
        loss.backward()
        with lock:
            opt.step()
        opt.zero_grad(set_to_none=True)
        if LEAK:
            kept.append(torch.empty(16 << 20, dtype=torch.uint8, device="cuda"))  # PLANTED LEAK
        label.step_end()
    stop.set()
    thread.join()
    label.write(leak_line=marked_line(__file__, "# PLANTED" + " LEAK") if LEAK else None, **torch_counters(torch))
