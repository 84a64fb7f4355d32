"""allocscope's bootstrap for Python jobs run by `allocscope record` (which puts this folder first on PYTHONPATH).

It runs the sitecustomize it shadows (the user's or the distribution's), then, once the job imports torch, turns on
PyTorch's own memory recorder when CUDA initialises (torch.cuda._lazy_call: the job's CUDA start is not moved
earlier, so forking before CUDA keeps working), and writes PyTorch's snapshot beside the capture's at exit and on an
out-of-memory error: tensor-level blocks, Python stacks and annotations that the driver-level capture cannot see.
The capture library then writes its output as that snapshot, byte for byte, with the device memory it saw outside
PyTorch's allocator (NCCL, cuBLAS, ...) under one more key, `allocscope_outside` (allocscope_capture_dump_merged):
one file that PyTorch's tools and allocscope both open. If that fails, PyTorch's file stays as X.torch.pickle.
Nothing here may break the job: every step catches its errors and says so once on stderr.

Gradients: PyTorch's autograd engine allocates them on its own threads, which run no Python; a wrapper of
torch.autograd.graph._engine_run_backward lends the waiting thread's Python frames (as they are when backward
starts) to those allocations in the capture (allocscope_capture_python_lend_begin/end), so their site is the line
that called backward.

Environment (set by `allocscope record`): ALLOCSCOPE_TORCH=1 turns the torch part on; ALLOCSCOPE_TORCH_RECORDER=0
keeps the frames lent to backward but leaves PyTorch's recorder off (the capture's own snapshot only);
ALLOCSCOPE_TORCH_MAX_ENTRIES (default 100000); ALLOCSCOPE_CAPTURE_LIBRARY, the capture library, whose allocscope_capture_output_path names the
snapshot (the same %p/%r rule); PyTorch's is written first to that name with ".pickle(.gz)" replaced by
".torch.pickle", and removed once merged (kept with ALLOCSCOPE_KEEP_TORCH_SNAPSHOT=1).
"""
import os
import sys


def _say(msg):
    try:
        sys.stderr.write("allocscope bootstrap: %s\n" % msg)
    except Exception:
        pass


def _chain():
    """Runs the next sitecustomize on sys.path, which this module hides by its name."""
    here = os.path.dirname(os.path.abspath(__file__))
    for d in sys.path:
        try:
            if not d or os.path.abspath(d) == here:
                continue
            path = os.path.join(d, "sitecustomize.py")
            if not os.path.isfile(path):
                continue
            import importlib.util
            spec = importlib.util.spec_from_file_location("_allocscope_chained_sitecustomize", path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
        except Exception as e:  # the user's sitecustomize failing must look as it would without us
            _say("the sitecustomize in %s raised %r" % (d, e))
        return


_lib = None


def _capture():
    global _lib
    if _lib is None:
        import ctypes
        lib = ctypes.CDLL(os.environ["ALLOCSCOPE_CAPTURE_LIBRARY"])
        lib.allocscope_capture_output_path.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        lib.allocscope_capture_dump_merged.argtypes = [ctypes.c_char_p, ctypes.c_int]
        lib.allocscope_capture_last_error.restype = ctypes.c_char_p
        _lib = lib
    return _lib


def _output():
    import ctypes
    buf = ctypes.create_string_buffer(4096)
    if _capture().allocscope_capture_output_path(buf, len(buf)) != 0:
        raise RuntimeError("allocscope_capture_output_path failed")
    return buf.value.decode()


def _torch_output(path):
    for ext in (".pickle.gz", ".pickle", ".gz"):
        if path.endswith(ext):
            return path[: -len(ext)] + ".torch.pickle"
    return path + ".torch.pickle"


def _dump(torch, when):
    """PyTorch's snapshot, then the capture's output as that snapshot with the memory outside PyTorch added."""
    try:
        if not torch.cuda.is_initialized():
            return  # no CUDA in this process: nothing to write (as the capture does)
        out = _output()
        path = _torch_output(out)
        torch.cuda.memory._dump_snapshot(path)
    except Exception as e:
        _say("%s: PyTorch's snapshot not written: %r" % (when, e))
        return
    try:
        lib = _capture()
        if lib.allocscope_capture_dump_merged(path.encode(), 1 if when == "at exit" else 0) != 0:
            raise RuntimeError(lib.allocscope_capture_last_error().decode(errors="replace"))
        if os.environ.get("ALLOCSCOPE_KEEP_TORCH_SNAPSHOT") != "1":
            os.remove(path)  # it is inside the merged file, byte for byte
        _say("%s: wrote %s (PyTorch's snapshot, and the device memory outside PyTorch's allocator)" % (when, out))
    except Exception as e:
        _say("%s: not merged (%s); PyTorch's own snapshot is %s" % (when, e, path))


def _start_recorder(torch):
    try:
        entries = int(os.environ.get("ALLOCSCOPE_TORCH_MAX_ENTRIES", "100000"))
        # Python stacks only: the capture has the native frames, and C++ stacks would cost PyTorch an unwind per block.
        torch.cuda.memory._record_memory_history(max_entries=entries, stacks="python")
        try:
            torch._C._cuda_attach_out_of_memory_observer(lambda *args: _dump(torch, "on OOM"))
        except Exception as e:
            _say("no out-of-memory observer: %r" % (e,))
    except Exception as e:
        _say("PyTorch's recorder not started: %r" % (e,))


def _lend_frames_to_backward(torch):
    """PyTorch's autograd engine allocates gradients on its own threads, which run no Python. While the job's thread
    waits in backward, the capture gives those allocations that thread's Python frames (the line that called
    backward), through a wrapper of torch.autograd.graph._engine_run_backward, where every backward and grad goes."""
    try:
        import torch.autograd.graph as graph
        run = graph._engine_run_backward
        lib = _capture()
        begin, end = lib.allocscope_capture_python_lend_begin, lib.allocscope_capture_python_lend_end

        import ctypes
        end.argtypes = [ctypes.c_int]

        def _engine_run_backward(*args, **kwargs):
            token = begin()
            try:
                return run(*args, **kwargs)
            finally:
                end(token)

        for name, module in list(sys.modules.items()):  # torch.autograd imported the function by name
            if name != "torch" and not name.startswith("torch."):
                continue
            # The module's own dict: a module-level __getattr__ (lazy imports) must not run here.
            if (getattr(module, "__dict__", None) or {}).get("_engine_run_backward") is run:
                module._engine_run_backward = _engine_run_backward
    except Exception as e:
        _say("gradients keep native frames only (no Python line): %r" % (e,))


def _on_torch_imported(torch):
    _lend_frames_to_backward(torch)
    if os.environ.get("ALLOCSCOPE_TORCH_RECORDER") == "0":
        return  # the capture's own snapshot only (its frames, gradients' lent ones included)
    try:
        import atexit
        atexit.register(_dump, torch, "at exit")  # after torch's own: runs before torch's teardown
        torch.cuda._lazy_call(lambda: _start_recorder(torch))
    except Exception as e:
        _say("PyTorch's recorder not set up: %r" % (e,))


class _TorchWatch:
    """A meta path finder that sees `import torch` once, lets the normal machinery load it, then hooks it."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        try:
            sys.meta_path.remove(self)
            import importlib.util
            spec = importlib.util.find_spec("torch")
            if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
                return spec
            run = spec.loader.exec_module

            def exec_module(module):
                run(module)
                _on_torch_imported(module)
            spec.loader.exec_module = exec_module
            return spec
        except Exception as e:
            _say("torch import not watched: %r" % (e,))
            return None


_chain()
if os.environ.get("ALLOCSCOPE_TORCH") == "1" and os.environ.get("ALLOCSCOPE_CAPTURE_LIBRARY"):
    if "torch" in sys.modules:
        _on_torch_imported(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _TorchWatch())
