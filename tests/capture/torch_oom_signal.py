"""Under `allocscope record --no-dump-at-exit --dump-signal USR1`: allocates, asks for a dump with SIGUSR1 (the
handler only wakes a helper thread), then forces a CUDA out-of-memory error that PyTorch turns into an exception.
usage: torch_oom_signal.py OUTPUT_PATH  (the signal dump is moved to OUTPUT_PATH.signal; the OOM dump stays)"""
import os
import signal
import sys
import time

import torch

x = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
os.kill(os.getpid(), signal.SIGUSR1)
for _ in range(100):  # the helper thread dumps; wait for the file rather than a fixed time
    if os.path.exists(sys.argv[1]):
        break
    time.sleep(0.05)
print("signal dump exists:", os.path.exists(sys.argv[1]))
os.rename(sys.argv[1], sys.argv[1] + ".signal")  # the OOM dump goes to the same configured path
try:
    torch.empty(1 << 50, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError as e:
    print("PyTorch raised OutOfMemoryError:", str(e).splitlines()[0][:100])
