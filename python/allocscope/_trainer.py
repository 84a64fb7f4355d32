"""What the Lightning and Hugging Face callbacks share: one recording per training run, a snapshot at the first OOM
(with its answer printed), a leak check at the end of each epoch, and the snapshot at the end of training."""
import sys

from ._record import record


class CallbackProperties:
    """What both callbacks expose: the recording, the leak answers of each epoch, and the file written."""

    @property
    def recording(self):
        return self._rec.record

    @property
    def leak_answers(self):
        return self._rec.leak_answers

    @property
    def path(self):
        """The snapshot written at the end (or at the OOM)."""
        return self._rec.path or self._rec.record.oom_path


class TrainerRecording:
    def __init__(self, path, max_entries, leak_check, gpu, quiet):
        self.record = record(path=path, max_entries=max_entries, gpu=gpu, quiet=quiet)
        self.leak_check = leak_check
        self.quiet = quiet
        self.leak_answers = []  # one per epoch checked: allocscope's `leaks` answer
        self.path = None

    def begin(self):
        if not self.record.active:
            self.record.start()

    def epoch_end(self, epoch):
        """The leaks answer of the recording so far; a suspected leak is said on stderr with its sites."""
        if not (self.leak_check and self.record.active):
            return None
        try:
            with self.record.snapshot() as snap:
                answer = snap.leaks()
        except Exception as e:
            sys.stderr.write("allocscope: leak check after epoch %s skipped: %s\n" % (epoch, e))
            return None
        self.leak_answers.append(answer)
        if not answer.ok and not self.quiet:
            sys.stderr.write("allocscope: after epoch %s: %s" % (epoch, answer.text))
        return answer

    def end(self):
        if self.record.active:
            self.path = self.record.stop()
            if self.path and not self.quiet:
                sys.stderr.write("allocscope: wrote %s\n" % self.path)
        return self.path

    def exception(self, exc):
        """After an error: the OOM's snapshot is written already (the observer); anything else ends the recording."""
        import torch
        if isinstance(exc, torch.cuda.OutOfMemoryError) and self.record.oom_path:
            self.record.active = False
            try:
                torch.cuda.memory._record_memory_history(enabled=None)
            except Exception:
                pass
            return self.record.oom_path
        return self.end()
