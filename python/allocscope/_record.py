"""Recording from inside a Python job: PyTorch's own recorder, plus allocscope's capture of the device memory outside
PyTorch's allocator (NCCL, cuBLAS, ...) where the capture library is installed; a snapshot at the end and at the
first out-of-memory error, with the OOM answer printed."""
import ctypes
import gzip
import os
import pickle
import sys
import tempfile

from . import _native, _paths
from ._native import AllocscopeError


def _say(msg):
    try:
        sys.stderr.write("allocscope: %s\n" % msg)
        sys.stderr.flush()
    except Exception:
        pass


class _CaptureOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("output_path", ctypes.c_char_p), ("max_entries", ctypes.c_uint64),
                ("stacks", ctypes.c_int32), ("max_frames", ctypes.c_int32), ("dump_on_oom", ctypes.c_int32),
                ("dump_signal", ctypes.c_int32), ("dump_at_exit", ctypes.c_int32)]


class _Capture:
    """liballocscope_capture.so in this process (linked mode): started after CUDA, it sees what is allocated from
    then on; PyTorch's own snapshot covers the tensors that were alive before."""

    def __init__(self, template, max_entries):
        lib_path = _paths.capture_library()
        if lib_path is None:
            raise AllocscopeError("the capture library is not installed (it is built where the CUDA toolkit with "
                                  "CUPTI is found)")
        lib = ctypes.CDLL(str(lib_path))
        lib.allocscope_capture_default_options.argtypes = [ctypes.POINTER(_CaptureOptions)]
        lib.allocscope_capture_start.argtypes = [ctypes.POINTER(_CaptureOptions)]
        lib.allocscope_capture_dump_merged.argtypes = [ctypes.c_char_p, ctypes.c_int]
        lib.allocscope_capture_last_error.restype = ctypes.c_char_p
        lib.allocscope_capture_output_path.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        opts = _CaptureOptions()
        opts.struct_size = ctypes.sizeof(_CaptureOptions)
        lib.allocscope_capture_default_options(ctypes.byref(opts))
        self._path = template.encode()  # kept alive: the library reads it at dump time
        opts.output_path = self._path
        opts.max_entries = max_entries
        opts.stacks = 2  # native frames with the Python frames merged in
        opts.dump_on_oom = 0  # this module dumps (PyTorch's snapshot, merged), from PyTorch's OOM observer
        opts.dump_at_exit = 0
        if lib.allocscope_capture_start(ctypes.byref(opts)) != 0:
            raise AllocscopeError(lib.allocscope_capture_last_error().decode(errors="replace"))
        self.lib = lib
        buf = ctypes.create_string_buffer(4096)
        if lib.allocscope_capture_output_path(buf, len(buf)) != 0:
            raise AllocscopeError("the capture's output path does not fit")
        self.output = buf.value.decode()  # the template expanded by the capture's own rule

    def merge(self, torch_snapshot, final):
        if self.lib.allocscope_capture_dump_merged(torch_snapshot.encode(), 1 if final else 0) != 0:
            raise AllocscopeError(self.lib.allocscope_capture_last_error().decode(errors="replace"))

    def stop(self):
        self.lib.allocscope_capture_stop()


class record:
    """Records a PyTorch job's CUDA memory while the block runs::

        with allocscope.record("run.pickle.gz"):
            train()

    On entry: PyTorch's recorder (``torch.cuda.memory._record_memory_history``, at most `max_entries` trace
    entries, so a long job's memory stays bounded) and, with ``capture=True`` where the capture library is
    installed, allocscope's capture of the device memory outside PyTorch's allocator. On exit: one snapshot at
    `path` (``%p``: the process id, ``%r``: the rank; ``.gz`` is gzipped), which PyTorch's tools and allocscope
    open (the name as given: ``-rankN`` is added only under a launcher of several ranks, as ``allocscope record``
    names files). At the first out-of-memory error: the snapshot is written before the error unwinds (PyTorch's OOM
    observer), and the OOM answer (the cause, what to do, the largest live allocations) is printed on stderr and
    kept as ``.oom_answer``; the error itself goes on as it would. Nothing here ever hides the job's own error."""

    def __init__(self, path="allocscope-%p.pickle.gz", max_entries=100000, stacks="all", capture=True,
                 dump_on_oom=True, gpu=None, quiet=False):
        self.path_template = path
        self.path = None
        self.max_entries = int(max_entries)
        self.stacks = stacks
        self.capture = capture
        self.dump_on_oom = dump_on_oom
        self.gpu = gpu
        self.quiet = quiet
        self.active = False
        self.oom_answer = None
        self.oom_path = None
        self._capture = None
        self._torch = None

    # -- start and stop ---------------------------------------------------------------------------------------------
    def start(self):
        import torch
        self._torch = torch
        # %p, %r and -rankN under a launcher of several ranks: the capture's own rule (allocscope_output_path).
        self.path = _native.output_path(self.path_template)
        torch.cuda.memory._record_memory_history(max_entries=self.max_entries, stacks=self.stacks)
        self.active = True
        if self.capture:
            try:
                self._capture = _Capture(self.path_template, self.max_entries)
                self.path = self._capture.output
            except Exception as e:  # PyTorch's recorder alone still answers most questions
                self._capture = None
                if not self.quiet:
                    _say("memory outside PyTorch's allocator is not recorded: %s" % e)
        if self.dump_on_oom:
            try:
                torch._C._cuda_attach_out_of_memory_observer(self._on_oom)
            except Exception as e:
                _say("no snapshot at an out-of-memory error (PyTorch's OOM observer is missing: %r)" % (e,))
        return self

    def stop(self):
        """Writes the snapshot and stops recording. Returns the path written (None if nothing was)."""
        if not self.active:
            return None
        written = None
        try:
            written = self.dump(final=True)
        finally:
            self.active = False
            try:
                self._torch.cuda.memory._record_memory_history(enabled=None)
            except Exception:
                pass
            if self._capture is not None:
                try:
                    self._capture.stop()
                except Exception:
                    pass
        return written

    def __enter__(self):
        return self.start()

    def __exit__(self, exc_type, exc, tb):
        if not self.active:
            return False
        if self.oom_path and exc_type is not None and issubclass(exc_type, self._torch.cuda.OutOfMemoryError):
            # The snapshot at the OOM is the one to read: the unwinding since has freed what was alive.
            self.active = False
            try:
                self._torch.cuda.memory._record_memory_history(enabled=None)
            except Exception:
                pass
            return False
        try:
            self.stop()
        except Exception as e:
            if exc_type is None:
                raise
            _say("the snapshot was not written: %r" % (e,))
        return False

    # -- writing ----------------------------------------------------------------------------------------------------
    def dump(self, path=None, final=False):
        """Writes the snapshot as it is now to `path` (default: the record's path). Returns the path."""
        torch = self._torch
        path = _native.output_path(path) if path else self.path
        if self._capture is not None and path == self.path:
            # PyTorch's snapshot, then the capture's output as that snapshot plus the memory outside PyTorch.
            fd, tmp = tempfile.mkstemp(suffix=".torch.pickle", dir=os.path.dirname(os.path.abspath(path)))
            os.close(fd)
            try:
                torch.cuda.memory._dump_snapshot(tmp)
                self._capture.merge(tmp, final)
                return path
            except Exception as e:
                _say("not merged with the memory outside PyTorch (%s); writing PyTorch's snapshot alone" % e)
            finally:
                try:
                    os.remove(tmp)
                except OSError:
                    pass
        snapshot = torch.cuda.memory._snapshot()
        opener = gzip.open if path.endswith(".gz") else open
        tmp = path + ".tmp"
        with opener(tmp, "wb") as f:
            pickle.dump(snapshot, f)
        os.replace(tmp, path)
        return path

    def _on_oom(self, device, alloc, device_allocated, device_free):
        # Called by PyTorch's allocator, its lock released, before the OutOfMemoryError is raised: what was alive
        # is still alive. Only the first OOM of this record: a job that catches OOMs and retries smaller would
        # otherwise rewrite the file at each try.
        if not self.active or self.oom_path:
            return
        try:
            self.oom_path = self.dump()
        except Exception as e:
            _say("out of memory, and the snapshot could not be written: %r" % (e,))
            return
        try:
            from ._snapshot import load
            with load(self.oom_path) as snap:
                self.oom_answer = snap.oom(gpu=self.gpu, top=5)
                self.oom_answer.text  # its text too, while the file is open
            if not self.quiet:
                _say("out of memory on cuda:%s asking for %s; snapshot written to %s\n%s"
                     % (device, _size(alloc), self.oom_path, self.oom_answer.text.rstrip()))
        except Exception as e:
            _say("out of memory; snapshot written to %s (not analysed here: %s)" % (self.oom_path, e))

    # -- answers while recording ------------------------------------------------------------------------------------
    def snapshot(self):
        """The recording so far as a loaded Snapshot (read in this process from PyTorch's snapshot, by allocscope's
        reader)."""
        from ._snapshot import Snapshot
        data = pickle.dumps(self._torch.cuda.memory._snapshot(), protocol=2)
        return Snapshot(_native.load_bytes(data, "<recording>"), "<recording>")


def _size(n):
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return "%.1f%s" % (n, unit)
        n /= 1024
