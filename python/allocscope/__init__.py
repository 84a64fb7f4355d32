"""allocscope: answers from PyTorch CUDA memory snapshots (peak, leaks, OOM causes, diffs, what-if), in Python.

    import allocscope
    snap = allocscope.load("run.pickle.gz")     # never runs code from the file, unlike pickle.load
    print(snap.summary())                        # the CLI's text; the value is the CLI's --json as a dict
    snap.peak()["devices"][0]["allocated_bytes"]
    with allocscope.record("run.pickle.gz"):     # PyTorch's recorder (+ memory outside PyTorch), dump on OOM
        train()

Every answer is computed by allocscope's C++ core in this process and equals ``allocscope VERB FILE --json``.
"""
from ._answer import Answer
from ._native import AllocscopeError
from ._record import record
from ._snapshot import Snapshot, load

__version__ = "0.1.0"
__all__ = ["Answer", "AllocscopeError", "Snapshot", "load", "record", "check", "__version__"]


def check(baseline, new, max_peak_growth="5%", **kwargs):
    """``allocscope check BASELINE NEW``: paths or Snapshots. The answer's ``.ok`` is False on a regression."""
    opened = []

    def snap(x):
        if isinstance(x, Snapshot):
            return x
        s = load(x)
        opened.append(s)
        return s
    try:
        return snap(baseline).check(snap(new), max_peak_growth=max_peak_growth, **kwargs)
    finally:
        for s in opened:
            s.close()
