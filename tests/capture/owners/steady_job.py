# A job that reserves everything in its first steps, then trains for STEADY seconds with no new cudaMalloc: under
# `allocscope record --max-entries N` PyTorch's trace ring then holds only the late steps, long after the capture's
# last event, which is the case a merge must still recognise as one process. usage: python3 steady_job.py LABEL.json
import json, sys, time
import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from torch_job import make_model, train_step  # noqa: E402

if __name__ == "__main__":
    dev = torch.device("cuda")
    model, opt = make_model(dev)
    for step in range(3):
        train_step(model, opt, dev)
    torch.cuda.synchronize()
    reserved = torch.cuda.memory_reserved()
    end = time.time() + 3.0
    steps = 0
    while time.time() < end:
        train_step(model, opt, dev)
        steps += 1
    torch.cuda.synchronize()
    label = {"job": "steady", "memory_reserved": torch.cuda.memory_reserved(), "reserved_after_warmup": reserved,
             "steady_steps": steps, "torch": torch.__version__}
    json.dump(label, open(sys.argv[1], "w"), indent=1)
    print(label)
