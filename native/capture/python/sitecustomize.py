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
that called backward. NCCL's proxy thread maps a communicator's peer buffers while the job's thread waits in a
collective: torch.distributed's collectives lend their caller's frames the same way (wrapped where distributed_c10d
defines them and where torch.distributed exports them). The capture also keeps each such call as a time window with
those frames (allocscope_capture_python_lend_begin_for); the merged file carries the windows, and allocscope's loader
gives PyTorch's own entries of a window that have no frames (its engine threads record none) the same line.

What the file will lack is said in it too (allocscope_capture_note): PyTorch's recorder not started, a merge that
failed, backward() not wrapped; `allocscope summary` warns of them.

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
        lib.allocscope_capture_python_lend_begin_for.argtypes = [ctypes.c_char_p]
        lib.allocscope_capture_note.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
        _lib = lib
    return _lib


def _note(key, text):
    """What the file will lack, said in the file too (its capture notes, which `allocscope summary` warns of)."""
    try:
        _capture().allocscope_capture_note(key.encode(), text.encode(errors="replace"))
    except Exception:
        pass


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
        _note("torch_recorder", "its snapshot was not written %s: %r" % (when, e))
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
        _note("torch_recorder", "not merged %s (%s); PyTorch's own snapshot is %s" % (when, e, path))


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
        _note("torch_recorder", "not started: %r" % (e,))


_lend = None


def _lender():
    """A wrapper maker: while the wrapped function runs, allocations on threads that run no Python (PyTorch's
    autograd engine, NCCL's proxy threads) get the calling thread's Python frames as they were at the call. The
    capture also keeps the call's time span with those frames (named by `call`), and the loader gives them to
    PyTorch's own entries of that span that have no frames: in the merged file, a gradient's site is its
    backward() line too."""
    global _lend
    if _lend is None:
        import ctypes
        import functools
        lib = _capture()
        begin, end = lib.allocscope_capture_python_lend_begin_for, lib.allocscope_capture_python_lend_end
        end.argtypes = [ctypes.c_int]

        def lend(fn, call):
            if getattr(fn, "_allocscope_lends", False):
                return fn
            name = call.encode()

            @functools.wraps(fn)  # name, docstring and signature stay the function's own
            def lent(*args, **kwargs):
                token = begin(name)  # frames read without this wrapper's own
                try:
                    return fn(*args, **kwargs)
                finally:
                    end(token)
            lent._allocscope_lends = True
            return lent
        _lend = lend
    return _lend


def _rebind(originals):
    """Every loaded torch module that imported one of the original functions by name now holds its wrapper: torch's
    modules bind them by name before the bootstrap sees torch (torch.autograd binds _engine_run_backward,
    device_mesh binds new_group and init_process_group). `originals`: name -> (function, wrapper)."""
    for mod_name, module in list(sys.modules.items()):
        if mod_name != "torch" and not mod_name.startswith("torch."):
            continue
        d = getattr(module, "__dict__", None) or {}  # its own dict: a module __getattr__ must not run
        for name, (fn, lent) in originals.items():
            if d.get(name) is fn:
                d[name] = lent


def _lend_frames_to_backward(torch):
    """PyTorch's autograd engine allocates gradients on its own threads, which run no Python. While the job's thread
    waits in backward, the capture gives those allocations that thread's Python frames (the line that called
    backward), through a wrapper of torch.autograd.graph._engine_run_backward, where every backward and grad goes."""
    try:
        import torch.autograd.graph as graph
        run = graph._engine_run_backward
        _rebind({"_engine_run_backward": (run, _lender()(run, "backward"))})
    except Exception as e:
        _say("gradients keep native frames only (no Python line): %r" % (e,))
        _note("gradients", "no Python line (backward() not wrapped: %r)" % (e,))


# The torch.distributed functions that can reach NCCL (a collective, a point-to-point operation, a group made or a
# communicator set up). Queries (get_rank, is_initialized, ...) stay unwrapped: they are called every step, and
# torch.compile folds them by identity. Deprecated ones (all_gather_coalesced, all_reduce_coalesced) too: their
# warning names the caller's line, which a wrapper would take.
_C10D_CALLS = (
    "all_gather", "all_gather_into_tensor", "all_gather_object", "all_reduce", "all_to_all", "all_to_all_single",
    "barrier", "batch_isend_irecv", "broadcast", "broadcast_object_list", "gather", "gather_object",
    "init_process_group", "irecv", "isend", "monitored_barrier", "new_group", "new_subgroups",
    "new_subgroups_by_enumeration", "recv", "recv_object_list", "reduce", "reduce_scatter", "reduce_scatter_tensor",
    "scatter", "scatter_object_list", "send", "send_object_list", "split_group")


def _lend_frames_to_c10d(c10d):
    """NCCL allocates a communicator's buffers on its own proxy thread, which runs no Python, while the job's thread
    waits in the collective that set the connection up (the first one on a communicator: DDP's constructor, an
    all_reduce). The collectives of distributed_c10d lend their caller's frames, so those buffers' site is the job's
    line. Wrapped where the module defines them (its own internal calls, and modules that import them later, get the
    wrapper) and wherever a loaded module already imported them by name."""
    try:
        import inspect
        lend = _lender()
        originals = {}
        for name in _C10D_CALLS:
            fn = c10d.__dict__.get(name)
            if inspect.isfunction(fn):
                originals[name] = (fn, lend(fn, name))
                setattr(c10d, name, originals[name][1])
        _rebind(originals)
    except Exception as e:
        _say("NCCL's own threads keep native frames only (distributed_c10d): %r" % (e,))


# torch.distributed's C++ entry points that reach NCCL without Python in between: DDP's constructor checks and
# broadcasts the parameters through them (the first collective on its communicator), as `dist.NAME(...)`.
_C10D_CPP_CALLS = ("_broadcast_coalesced", "_verify_params_across_processes")


def _lend_frames_to_distributed(dist):
    """torch.distributed's C++ entry points, wrapped under torch.distributed's names (where the wrapper says it lives,
    so that pickling one by reference finds the wrapper)."""
    try:
        lend = _lender()
        for name in _C10D_CPP_CALLS:
            fn = dist.__dict__.get(name)
            if callable(fn) and not getattr(fn, "_allocscope_lends", False):
                lent = lend(fn, name)
                lent.__module__ = dist.__name__
                setattr(dist, name, lent)
    except Exception as e:
        _say("NCCL's own threads keep native frames only (torch.distributed): %r" % (e,))


def _on_torch_imported(torch):
    _lend_frames_to_backward(torch)
    _when_imported("torch.distributed.distributed_c10d", _lend_frames_to_c10d)
    _when_imported("torch.distributed", _lend_frames_to_distributed)
    if os.environ.get("ALLOCSCOPE_TORCH_RECORDER") == "0":
        return  # the capture's own snapshot only (its frames, gradients' lent ones included)
    try:
        import atexit
        atexit.register(_dump, torch, "at exit")  # after torch's own: runs before torch's teardown
        torch.cuda._lazy_call(lambda: _start_recorder(torch))
    except Exception as e:
        _say("PyTorch's recorder not set up: %r" % (e,))


class _Watch:
    """A meta path finder for one module: its import, when it happens, runs `then` with the module (complete, before
    its importer goes on). Other lookups of that name (importlib.util.find_spec("torch"), which libraries call to
    see whether torch is installed) get a spec too, but the watch stays until the module is executed."""

    def __init__(self, name, then):
        self.name, self.then, self.busy, self.done = name, then, False, False

    def find_spec(self, name, path=None, target=None):
        if name != self.name or self.busy:
            return None
        try:
            import importlib.util
            self.busy = True  # the lookup below walks sys.meta_path again
            try:
                spec = importlib.util.find_spec(name)
            finally:
                self.busy = False
            if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
                return spec
            watch, run = self, spec.loader.exec_module

            def exec_module(module):
                try:
                    sys.meta_path.remove(watch)
                except ValueError:
                    pass
                run(module)
                if not watch.done:  # once, however many of its specs get executed
                    watch.done = True
                    watch.then(module)
            spec.loader.exec_module = exec_module
            return spec
        except Exception as e:
            _say("%s import not watched: %r" % (name, e))
            return None


def _when_imported(name, then):
    if name in sys.modules:
        then(sys.modules[name])
    else:
        sys.meta_path.insert(0, _Watch(name, then))


_chain()
if os.environ.get("ALLOCSCOPE_TORCH") == "1" and os.environ.get("ALLOCSCOPE_CAPTURE_LIBRARY"):
    _when_imported("torch", _on_torch_imported)
