# Allocates until PyTorch raises OutOfMemoryError, then frees and exits normally: under `allocscope record` the
# capture dumps on the driver's out-of-memory result and the bootstrap writes PyTorch's snapshot from PyTorch's OOM
# observer and again at exit. usage: python3 oom_job.py
import torch

held = []
try:
    while True:
        held.append(torch.empty(8 << 30, dtype=torch.uint8, device="cuda"))
except torch.OutOfMemoryError as e:
    print("OutOfMemoryError after", len(held), "x 8 GiB:", str(e).splitlines()[0][:90])
held.clear()
