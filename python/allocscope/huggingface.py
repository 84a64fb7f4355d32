"""A Hugging Face ``TrainerCallback``: ``Trainer(..., callbacks=[allocscope.huggingface.AllocscopeCallback()])``.

The same recording as the Lightning callback: PyTorch's recorder (and memory outside PyTorch where the capture
library is installed) from the start of training, a snapshot at the first out-of-memory error, written from
PyTorch's OOM observer before the error unwinds (the Trainer has no exception event) with its cause printed, a leak
check at the end of each epoch (``leak_answers``), and the snapshot at the end of training."""
from transformers import TrainerCallback

from ._trainer import CallbackProperties, TrainerRecording


class AllocscopeCallback(CallbackProperties, TrainerCallback):
    def __init__(self, path="allocscope-rank%r.pickle.gz", max_entries=100000, leak_check=True, gpu=None,
                 quiet=False):
        self._rec = TrainerRecording(path, max_entries, leak_check, gpu, quiet)

    def on_train_begin(self, args, state, control, **kwargs):
        self._rec.begin()

    def on_epoch_end(self, args, state, control, **kwargs):
        self._rec.epoch_end(state.epoch)

    def on_train_end(self, args, state, control, **kwargs):
        self._rec.end()
