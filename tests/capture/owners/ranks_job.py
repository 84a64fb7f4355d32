# Run by torchrun (RANK set by the launcher): each rank holds a buffer of its own size on the GPU, rank 2 three
# times more, then exits. Checks that `allocscope record` names each rank's file by its rank, that the launcher
# (which never touches CUDA) writes nothing, and that `allocscope ranks` finds rank 2. usage: torchrun ... ranks_job.py
import os, torch

rank = int(os.environ["RANK"])
x = torch.empty((64 + 8 * rank) << 20, dtype=torch.uint8, device="cuda")
extra = torch.empty((192 << 20) if rank == 2 else 0, dtype=torch.uint8, device="cuda")
y = torch.ones(1 << 20, device="cuda").sum()
torch.cuda.synchronize()
print(f"rank {rank}: reserved {torch.cuda.memory_reserved()}")
