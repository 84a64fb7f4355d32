"""Shared by the proof jobs (run_gpu.sh): times each step after a device synchronize and writes the job's label
(JSON, argv[1]): its script, the steps' times, the library's own memory counters, and, for a planted leak, its line.
analyse.py reads the label beside the snapshot `allocscope record` wrote for the same run."""
import json
import os
import statistics
import sys
import time


def marked_line(path, marker):
    """The line of `path` that carries `marker` (the planted leak's), 1-based."""
    with open(path) as f:
        for n, text in enumerate(f, 1):
            if marker in text and "marked_line" not in text:
                return n
    return None


class Label:
    def __init__(self, job, script, sync):
        self.out = sys.argv[1] if len(sys.argv) > 1 else None
        self.data = {"job": job, "script": os.path.basename(script), "recorded": "CUDA_INJECTION64_PATH" in os.environ}
        self.sync, self.times, self.t = sync, [], None

    def step_start(self):
        self.sync()
        self.t = time.perf_counter()

    def step_end(self):
        self.sync()
        self.times.append(1e3 * (time.perf_counter() - self.t))

    def write(self, **counters):
        warm = self.times[len(self.times) // 4:] or self.times  # the first quarter is warm-up
        self.data.update(counters)
        self.data["step_ms"] = [round(t, 3) for t in self.times]
        self.data["median_step_ms"] = round(statistics.median(warm), 3) if warm else None
        print(json.dumps(self.data))
        if self.out:
            with open(self.out, "w") as f:
                json.dump(self.data, f, indent=1)


def torch_counters(torch):
    return {"max_memory_reserved": torch.cuda.max_memory_reserved(), "memory_reserved": torch.cuda.memory_reserved(),
            "max_memory_allocated": torch.cuda.max_memory_allocated(), "torch": torch.__version__}
