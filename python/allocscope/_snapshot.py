"""A loaded snapshot and its answers, computed in this process by allocscope's C++ core (liballocscope)."""
import base64
import html
import json
import os
import shlex

from . import _native, _paths
from ._answer import Answer
from ._native import AllocscopeError

# A snapshot shown inline larger than this (gzipped) would make the notebook itself that large.
INLINE_LIMIT_BYTES = 64 << 20


def _options(**kwargs):
    """Keyword arguments as the CLI's options: None and False are left out, True is a switch, a list repeats the
    option; `from_step`/`to_step` are --from/--to and underscores become dashes."""
    aliases = {"from_step": "from", "to_step": "to"}
    items = []
    for key, value in kwargs.items():
        if value is None or value is False:
            continue
        name = aliases.get(key, key.rstrip("_").replace("_", "-"))
        if value is True:
            items.append([name, ""])
        elif isinstance(value, (list, tuple)):
            items.extend([name, str(v)] for v in value)
        else:
            items.append([name, str(value)])
    return items


def _rules(rules):
    """Category rules as the CLI's --rule values: "REGEX=CATEGORY" strings, or a {regex: category} dict."""
    if rules is None:
        return None
    if isinstance(rules, dict):
        return ["%s=%s" % (k, v) for k, v in rules.items()]
    if isinstance(rules, str):
        return [rules]
    return list(rules)


class Snapshot:
    """A PyTorch CUDA memory snapshot, loaded by allocscope's own reader: it builds plain tables and never imports or
    calls anything the file names, unlike ``pickle.load``, so a snapshot from anyone is safe to open.

    Every answer method returns an :class:`Answer`, equal to ``allocscope VERB FILE --json`` (the same C++ code
    computes both). In Jupyter the snapshot displays itself as the allocscope viewer, inline and offline."""

    def __init__(self, handle, path, window=None):
        self._handle = handle
        self.path = path
        # (from_step, to_step) when only a window of the file was loaded: the inline viewer opens the same window.
        self.window = window

    # -- lifetime ---------------------------------------------------------------------------------------------------
    def close(self):
        h, self._handle = self._handle, None
        _native.close(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _h(self):
        if not self._handle:
            raise AllocscopeError("%s: the snapshot is closed" % self.path)
        return self._handle

    def __repr__(self):
        return "<allocscope.Snapshot %s%s>" % (self.path, "" if self._handle else " (closed)")

    # -- answers ----------------------------------------------------------------------------------------------------
    def _answer(self, name, others=(), **kwargs):
        files = [self] + list(others)
        options = _options(**kwargs)
        status, out, notes = _native.answer(name, [f._h() for f in files], options + [["json", ""]])

        def text():
            if name == "export":  # JSON only, as `allocscope export --json`
                return out
            # The files' handles are taken again, now: a snapshot closed since says so rather than being read freed.
            return _native.answer(name, [f._h() for f in files], options)[1]
        return Answer(name, json.loads(out), status, notes, text)

    @property
    def devices(self):
        """The device ordinals the file holds (a trace or segments)."""
        return _native.devices(self._h())

    def summary(self, top=None):
        """Peaks, fragmentation, top sites, OOMs and warnings per device (``allocscope summary``)."""
        return self._answer("summary", top=top)

    def peak(self, device=None, from_step=None, to_step=None, top=None, tree=False):
        """The allocated and reserved peaks and what was alive at the allocated one (``allocscope peak``).
        ``from_step``/``to_step`` search those steps of what was loaded; ``load(path, from_step=, to_step=)`` loads only
        that window of a file, as ``allocscope peak --from --to`` does (categories are then judged from the window)."""
        return self._answer("peak", device=device, from_step=from_step, to_step=to_step, top=top, tree=tree)

    def leaks(self, device=None, rules=None):
        """What grows every iteration, and gradients held across steps (``allocscope leaks``). ``.ok`` is False when
        a leak is suspected."""
        return self._answer("leaks", device=device, rule=_rules(rules))

    def oom(self, gpu=None, top=None):
        """Each out-of-memory event: the cause and what to do (``allocscope oom``)."""
        return self._answer("oom", gpu=gpu, top=top)

    def categories(self, at=None, device=None, rules=None):
        """Bytes per kind (parameter, gradient, optimizer state, activation, ...) at the peak, the end or a step."""
        return self._answer("categories", at=at, device=device, rule=_rules(rules))

    def diff(self, other, top=None):
        """Live memory by stack, this file (A) against `other` (B) (``allocscope diff A B``)."""
        return self._answer("diff", [other], top=top)

    def check(self, new, max_peak_growth=None, max_reserved_growth=None, device=None, top=None):
        """This snapshot as the baseline, `new` as the change (``allocscope check``): ``.ok`` is False when the peak
        grew past the limit (default 5%) or `new` leaks where this one does not; ``["regressions"]`` names them."""
        return self._answer("check", [new], max_peak_growth=max_peak_growth, max_reserved_growth=max_reserved_growth,
                            device=device, top=top)

    def whatif(self, batch=None, seq=None, gpu=None, device=None):
        """The peak at `batch` (and `seq`) times the recorded batch (sequence length), and whether it fits `gpu`."""
        return self._answer("whatif", batch=batch, seq=seq, gpu=gpu, device=device)

    def whatif_changes(self, gpu=None, device=None, batch=None, seq=None, **changes):
        """The run under changes a user makes, as `allocscope whatif`'s flags: accumulate=4, precision="bf16-autocast",
        optimizer="sgd", checkpoint="all", zero_grad="zeros", allocator="expandable_segments:True",
        shard="zero2" with world_size=8, offload="optimizer". Each change's effect is in ["changes"]."""
        return self._answer("whatif", batch=batch, seq=seq, gpu=gpu, device=device, **changes)

    def plan(self, gpu=None, world_size=None, device=None, top=None):
        """What to change so the job fits `gpu` (or, without one, the GPU it ran out of memory on, else what cuts the
        peak most), cheapest first, each with the line that applies it (``allocscope plan``)."""
        return self._answer("plan", gpu=gpu, world_size=world_size, device=device, top=top)

    def export(self, tree=False, rules=None):
        """Every answer as one document (``allocscope export --json``)."""
        return self._answer("export", tree=tree, rule=_rules(rules))

    # -- data -------------------------------------------------------------------------------------------------------
    def _default_device(self):
        devices = self.devices
        if not devices:
            raise AllocscopeError("%s holds no device" % self.path)
        peaks = self.summary().get("devices", [])
        traced = [d["device"] for d in peaks if d.get("events", 0) > 0]
        return traced[0] if traced else devices[0]

    def allocations(self, device=None):
        """One device's allocations as columns (PyTorch's timeline rows): a dict of equal-length arrays, numpy arrays
        when numpy is installed, else ``array.array`` (``site`` and ``category`` are lists of strings). An allocation
        is alive in steps [alloc_step, free_step); step s is the state after the device's first s events."""
        device = self._default_device() if device is None else device
        c = _native.columns(self._h(), device)
        n = c.rows
        sites = json.loads(c.sites_json.decode("utf-8", errors="replace"))
        names = _native.category_names()
        try:
            import numpy as np

            def col(ptr, dtype):
                return np.ctypeslib.as_array(ptr, shape=(n,)).astype(dtype, copy=True) if n else np.zeros(0, dtype)
        except ImportError:
            import array
            import ctypes

            def col(ptr, dtype):
                code = {"uint64": "Q", "int64": "q", "uint32": "I", "uint8": "B"}[dtype]
                a = array.array(code)
                if n:
                    a.frombytes(ctypes.string_at(ptr, n * a.itemsize))
                return a
        site_ids, cat_ids = col(c.site, "uint32"), col(c.category, "uint8")
        return {
            "addr": col(c.addr, "uint64"),
            "size": col(c.size, "uint64"),
            "stream": col(c.stream, "int64"),
            "alloc_step": col(c.alloc_step, "uint32"),
            "free_step": col(c.free_step, "uint32"),
            "alloc_time_us": col(c.alloc_time_us, "int64"),
            "free_time_us": col(c.free_time_us, "int64"),
            "site": [sites[i] for i in site_ids],
            "category": [names[i] for i in cat_ids],
        }

    def dataframe(self, device=None):
        """allocations() as a pandas DataFrame (needs pandas)."""
        try:
            import pandas as pd
        except ImportError:
            raise AllocscopeError("dataframe() needs pandas (pip install pandas); allocations() gives the columns "
                                  "without it") from None
        cols = self.allocations(device)
        frame = pd.DataFrame(cols)
        for name in ("site", "category"):
            frame[name] = frame[name].astype("category")
        return frame

    # -- the viewer -------------------------------------------------------------------------------------------------
    def html(self):
        """The allocscope viewer with this snapshot inside, as one offline HTML page (``allocscope plot``)."""
        return report_html([self.path], self.window)

    def _repr_html_(self):
        try:
            size = os.path.getsize(self.path)
        except OSError:
            size = 0
        if size > INLINE_LIMIT_BYTES:
            flags = "".join(" --%s %s" % (k, shlex.quote(str(v)))
                            for k, v in zip(("from", "to"), self.window or ()) if v is not None)
            return ("<p>allocscope: %s is %.0f MiB, too large to show inside the notebook; "
                    "<code>allocscope view%s %s</code> opens it in the browser.</p>"
                    % (html.escape(str(self.path)), size / 2**20, html.escape(flags),
                       html.escape(shlex.quote(str(self.path)))))
        try:
            page = self.html()
        except AllocscopeError as e:
            return "<p>allocscope: the viewer is not available here: %s</p>" % html.escape(str(e))
        return iframe(page)


def iframe(page, height=720):
    """An HTML page inside an iframe of its own (srcdoc): its scripts, styles and policy stay in it."""
    return ('<iframe class="allocscope-viewer" style="width:100%%;height:%dpx;border:1px solid #ccc" '
            'sandbox="allow-scripts allow-downloads" srcdoc="%s"></iframe>' % (height, html.escape(page, quote=True)))


def report_html(paths, window=None):
    """One offline page of the viewer with `paths` inside; `window` (from_step, to_step): it opens only that window of
    each device's trace, as ``allocscope plot --from --to``."""
    import ctypes
    site = _paths.site()
    if site is None:
        raise AllocscopeError("the viewer's site is not installed (it is built with Emscripten: "
                              "cmake --workflow --preset wasm), or set ALLOCSCOPE_SITE")
    arr = (ctypes.c_char_p * len(paths))(*[str(p).encode() for p in paths])
    err = ctypes.c_void_p()
    text = lambda v: None if v is None else str(v).encode()
    window_from, window_to = window or (None, None)
    ptr = _native.lib().allocscope_report_html_window(str(site).encode(), arr, len(paths), text(window_from),
                                                      text(window_to), ctypes.byref(err))
    if not ptr:
        raise AllocscopeError(_native._take(err.value) or "the viewer page could not be made")
    return _native._take(ptr)


def load(path, from_step=None, to_step=None):
    """Loads a snapshot: ``.pickle``, ``.pickle.gz`` or a PyTorch ``trace_plot`` page, from a path or a file's bytes.
    Raises AllocscopeError naming the byte where the file stops being a snapshot.

    ``from_step``/``to_step`` load only that window of each device's trace, as ``allocscope peak FILE --from --to``:
    steps (ints) or times with a unit (``"1.5s"``, ``"200ms"``), so that a file of 100M events fits in memory; answers
    then search the window and name the file's steps."""
    if isinstance(path, (bytes, bytearray, memoryview)):
        if from_step is not None or to_step is not None:
            raise AllocscopeError("a window (from_step/to_step) is loaded from a path, not from bytes")
        return Snapshot(_native.load_bytes(path, "<bytes>"), "<bytes>")
    path = os.fspath(path)
    window = None if from_step is None and to_step is None else (from_step, to_step)
    return Snapshot(_native.load(path, None, from_step, to_step), path, window)
