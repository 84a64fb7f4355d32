"""A Lightning callback: ``Trainer(callbacks=[allocscope.lightning.AllocscopeCallback("run.pickle.gz")])``.

It records the fit's CUDA memory (PyTorch's recorder, and memory outside PyTorch where the capture library is
installed), writes a snapshot at the first out-of-memory error before it unwinds and prints its cause and what to
do, checks for leaks at the end of each training epoch (``leak_answers``), and writes the snapshot when the fit
ends. Works with ``lightning`` (``lightning.pytorch``) and with ``pytorch_lightning``."""
try:
    from lightning.pytorch import Callback as _Callback
except ImportError:  # the older package name
    from pytorch_lightning import Callback as _Callback

from ._trainer import CallbackProperties, TrainerRecording


class AllocscopeCallback(CallbackProperties, _Callback):
    def __init__(self, path="allocscope-rank%r.pickle.gz", max_entries=100000, leak_check=True, gpu=None,
                 quiet=False):
        super().__init__()
        self._rec = TrainerRecording(path, max_entries, leak_check, gpu, quiet)

    def on_fit_start(self, trainer, pl_module):
        self._rec.begin()

    def on_train_epoch_end(self, trainer, pl_module):
        self._rec.epoch_end(trainer.current_epoch)

    def on_fit_end(self, trainer, pl_module):
        self._rec.end()

    def on_exception(self, trainer, pl_module, exception):
        self._rec.exception(exception)
