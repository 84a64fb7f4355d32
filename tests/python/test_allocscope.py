"""The Python module against the CLI it must equal, on real snapshots (tests/fixtures): every answer's dict is the
CLI's --json document and its text the CLI's text, computed in-process by liballocscope. Run by tests/python/run.sh
with an installed wheel's Python (ALLOCSCOPE_CLI: the `allocscope` binary to compare with; ALLOCSCOPE_FIXTURES)."""
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import allocscope

FIXTURES = Path(os.environ.get("ALLOCSCOPE_FIXTURES", Path(__file__).resolve().parents[1] / "fixtures"))
CLI = os.environ.get("ALLOCSCOPE_CLI") or shutil.which("allocscope")

# Real files of several kinds: a leak, a ResNet, an OOM (several causes), two DDP ranks, a multi-GPU file from
# another project, a segments-only file, an empty one, torch.compile frames.
FILES = [
    "transformer_leak.pickle",
    "resnet50_train.pickle",
    "oom.pickle",
    "ddp_rank0.pickle",
    "oom_causes/oom_fragmentation.pickle.gz",
    "external/pt25_sqattn_4dev.pickle.gz",
    "external/listonly_segments.pickle.gz",
    "external/pt26_empty.pickle.gz",
    "external/pt26_cs336_compile_fwd.pickle.gz",
    "whatif/gpt_adamw_b8_s256.pickle.gz",
]


def console():
    """The `allocscope` command pip installed: beside this Python (a venv), else on PATH (pip --target)."""
    beside = Path(sys.executable).parent / "allocscope"
    return beside if beside.exists() else Path(shutil.which("allocscope") or "allocscope")


def cli(*args):
    p = subprocess.run([CLI] + [str(a) for a in args], capture_output=True, text=True, errors="replace")
    return p.returncode, p.stdout, p.stderr


class AnswersEqualTheCli(unittest.TestCase):
    def compare(self, verb, paths, kwargs, cli_options, method, load=None):
        code, out, _ = cli(verb, *paths, *cli_options, "--json")
        tcode, text, _ = cli(verb, *paths, *cli_options)
        if code == 1 and load:  # the CLI refuses the window: so must the module's load
            with self.assertRaises(allocscope.AllocscopeError):
                allocscope.load(paths[0], **load)
            return
        snaps = [allocscope.load(p, **(load or {})) for p in paths]
        try:
            if code == 1:  # the CLI refuses: so must the module, with the same words
                with self.assertRaises(allocscope.AllocscopeError):
                    method(snaps, kwargs)
                return
            a = method(snaps, kwargs)
            self.assertEqual(dict(a), json.loads(out), "%s %s %s" % (verb, paths, kwargs))
            self.assertEqual(a.exit_code, code)
            if verb == "export":  # JSON only: its text is its JSON
                self.assertEqual(a.text, out)
            else:
                self.assertEqual(a.text, text)
                self.assertEqual(tcode, code)
        finally:
            for s in snaps:
                s.close()

    def test_single_file_answers(self):
        cases = [
            ("summary", {}, [], lambda s, k: s[0].summary(**k)),
            ("summary", {"top": 2}, ["--top", "2"], lambda s, k: s[0].summary(**k)),
            ("peak", {}, [], lambda s, k: s[0].peak(**k)),
            ("peak", {"tree": True, "top": 3}, ["--tree", "--top", "3"], lambda s, k: s[0].peak(**k)),
            ("leaks", {}, [], lambda s, k: s[0].leaks(**k)),
            ("oom", {"gpu": "h100"}, ["--gpu", "h100"], lambda s, k: s[0].oom(**k)),
            ("categories", {"at": "end"}, ["--at", "end"], lambda s, k: s[0].categories(**k)),
            ("whatif", {"batch": 2, "gpu": "h100"}, ["--batch", "2", "--gpu", "h100"], lambda s, k: s[0].whatif(**k)),
            ("plan", {"gpu": "24gb"}, ["--gpu", "24gb"], lambda s, k: s[0].plan(**k)),
            ("export", {}, [], lambda s, k: s[0].export(**k)),
        ]
        checked = 0
        for name in FILES:
            path = FIXTURES / name
            for verb, kwargs, options, method in cases:
                with self.subTest(file=name, verb=verb, options=options):
                    self.compare(verb, [path], kwargs, options, method)
                    checked += 1
        self.assertEqual(checked, len(FILES) * len(cases))

    def test_changes_and_plan(self):
        path = FIXTURES / "plan_runs" / "gpt_sdpa.pickle.gz"
        self.compare("whatif", [path], {"accumulate": 2, "precision": "bf16-autocast", "gpu": "4gb"},
                     ["--accumulate", "2", "--precision", "bf16-autocast", "--gpu", "4gb"],
                     lambda s, k: s[0].whatif_changes(**k))
        self.compare("whatif", [path], {"shard": "zero2", "world_size": 4}, ["--shard", "zero2", "--world-size", "4"],
                     lambda s, k: s[0].whatif_changes(**k))
        self.compare("plan", [FIXTURES / "python_gpu" / "hf_oom.pickle.gz"], {}, [], lambda s, k: s[0].plan(**k))

    def test_window_device_and_rules(self):
        path = FIXTURES / "resnet50_train.pickle"
        # `peak --from --to` loads a window of the file: load(path, from_step, to_step) is the module's way.
        self.compare("peak", [path], {"device": 0}, ["--from", "4000", "--to", "6000", "--device", "0"],
                     lambda s, k: s[0].peak(**k), load={"from_step": 4000, "to_step": 6000})
        self.compare("summary", [path], {}, ["--from", "500ms", "--to", "1s"], lambda s, k: s[0].summary(**k),
                     load={"from_step": "500ms", "to_step": "1s"})
        self.compare("summary", [path], {}, ["--from", "20s"], lambda s, k: s[0].summary(**k),
                     load={"from_step": "20s"})  # no entry is that late: both refuse
        self.compare("categories", [path], {"rules": {"resnet": "unknown"}}, ["--rule", "resnet=unknown"],
                     lambda s, k: s[0].categories(**k))
        self.compare("leaks", [FIXTURES / "transformer_leak.pickle"], {"rules": ["x=activation", "y=gradient"]},
                     ["--rule", "x=activation", "--rule", "y=gradient"], lambda s, k: s[0].leaks(**k))

    def test_two_file_answers(self):
        a, b = FIXTURES / "ddp_rank0.pickle", FIXTURES / "ddp_rank1.pickle"
        self.compare("diff", [a, b], {}, [], lambda s, k: s[0].diff(s[1], **k))
        self.compare("diff", [a, b], {"top": 3}, ["--top", "3"], lambda s, k: s[0].diff(s[1], **k))
        base, new = FIXTURES / "resnet50_train.pickle", FIXTURES / "transformer_leak.pickle"
        self.compare("check", [base, new], {}, [], lambda s, k: s[0].check(s[1], **k))
        self.compare("check", [base, base], {"max_peak_growth": "1%"}, ["--max-peak-growth", "1%"],
                     lambda s, k: s[0].check(s[1], **k))

    def test_a_window_says_what_is_wrong_as_the_cli_does(self):
        path = FIXTURES / "resnet50_train.pickle"
        code, _, err = cli("peak", path, "--from", "2x")
        self.assertEqual(code, 1)
        with self.assertRaisesRegex(allocscope.AllocscopeError, r"unknown unit 'x'") as ctx:
            allocscope.load(path, from_step="2x")
        self.assertIn(str(ctx.exception), err)
        with allocscope.load(path, from_step=4000, to_step=6000) as s:
            self.assertEqual(dict(s.peak())["devices"][0]["window"], [4000, 6000])

    def test_errors_are_the_cli_words(self):
        with allocscope.load(FIXTURES / "resnet50_train.pickle") as s:
            with self.assertRaisesRegex(allocscope.AllocscopeError, r"^peak: --from needs a step number$"):
                s.peak(from_step="x")
            with self.assertRaisesRegex(allocscope.AllocscopeError, r"past the end of device 0's trace"):
                s.peak(from_step=10**9)
            with self.assertRaisesRegex(allocscope.AllocscopeError, r"^oom: .*gpu"):
                s.oom(gpu="no-such-gpu")
            with self.assertRaisesRegex(allocscope.AllocscopeError, r"no device 7"):
                s.allocations(device=7)
            a = s.summary()
        s.close()  # again: closing twice is harmless
        with self.assertRaisesRegex(allocscope.AllocscopeError, "closed"):
            s.summary()
        # An answer's text is made when first asked: from a closed file it is an error, never a read of freed memory
        # (the first GPU run's OOM handler read it after closing, and crashed the job with SIGSEGV).
        with self.assertRaisesRegex(allocscope.AllocscopeError, "closed"):
            a.text


class Loading(unittest.TestCase):
    def test_a_pickle_that_would_run_code_is_refused_and_runs_nothing(self):
        with tempfile.TemporaryDirectory() as d:
            marker = Path(d) / "ran"

            class Payload:
                def __reduce__(self):
                    return (os.system, ("touch %s" % marker,))
            evil = Path(d) / "evil.pickle"
            evil.write_bytes(pickle.dumps({"segments": [], "device_traces": [[Payload()]]}, protocol=2))
            # The oracle that it would run code: Python's own pickle.load does.
            with open(evil, "rb") as f:
                pickle.load(f)
            self.assertTrue(marker.exists())
            marker.unlink()
            with self.assertRaises(allocscope.AllocscopeError) as e:
                allocscope.load(evil)
            self.assertRegex(str(e.exception), r"at byte \d+")
            with self.assertRaises(allocscope.AllocscopeError):
                allocscope.load(evil.read_bytes())
            self.assertFalse(marker.exists())

    def test_missing_and_truncated_files(self):
        with self.assertRaisesRegex(allocscope.AllocscopeError, "no-such.pickle"):
            allocscope.load("/nonexistent/no-such.pickle")
        data = (FIXTURES / "oom.pickle").read_bytes()
        with self.assertRaisesRegex(allocscope.AllocscopeError, r"at byte \d+"):
            allocscope.load(data[: len(data) // 2])

    def test_bytes_and_gzip_load_the_same_snapshot(self):
        path = FIXTURES / "whatif" / "mlp_adamw_b256.pickle.gz"
        with allocscope.load(path) as a, allocscope.load(path.read_bytes()) as b:
            pa, pb = a.peak(), b.peak()
            self.assertEqual(pa, pb)
            self.assertGreater(pa["devices"][0]["allocated"]["bytes"], 0)

    def test_a_json_snapshot_loads_as_its_pickle(self):
        # Python's own json.dump of the unpickled snapshot, as a user who keeps JSON writes it, from a path and as bytes.
        with open(FIXTURES / "oom.pickle", "rb") as f:
            text = json.dumps(pickle.load(f)).encode()
        with allocscope.load(FIXTURES / "oom.pickle") as p, allocscope.load(text) as j, \
                allocscope.load(FIXTURES / "json" / "oom.json") as k:
            self.assertEqual(j.peak(), p.peak())
            self.assertEqual(k.oom(), p.oom())
        with self.assertRaisesRegex(allocscope.AllocscopeError, "of the JSON"):
            allocscope.load(text[: len(text) // 2])


class Recording(unittest.TestCase):
    def test_output_names_follow_the_captures_rule(self):
        # In a child process: the launcher variables must not leak into the other tests.
        code = (
            "import os, allocscope._native as n\n"
            "print(n.output_path('a.pickle'))\n"
            "os.environ['LOCAL_RANK'] = '0'\n"  # Lightning, one process: the name as given
            "print(n.output_path('a.pickle'))\n"
            "os.environ.update(WORLD_SIZE='4', RANK='2')\n"  # torchrun, four ranks
            "print(n.output_path('a.pickle.gz'))\n"
            "print(n.output_path('r%r-%%.pickle'))\n")
        env = {k: v for k, v in os.environ.items()
               if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "SLURM_NTASKS", "SLURM_PROCID", "OMPI_COMM_WORLD_SIZE",
                            "OMPI_COMM_WORLD_RANK", "PMI_SIZE", "PMI_RANK", "PMIX_RANK", "SLURM_NPROCS")}
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
        self.assertEqual(out.split(), ["a.pickle", "a.pickle", "a-rank2.pickle.gz", "r2-%.pickle"])


class Columns(unittest.TestCase):
    def test_columns_add_up_to_the_peak(self):
        # The columns are the timeline's rows: what is alive at the peak step must sum to the peak answer's bytes.
        for name in ["resnet50_train.pickle", "transformer_leak.pickle", "whatif/gpt_adamw_b8_s256.pickle.gz"]:
            with self.subTest(file=name), allocscope.load(FIXTURES / name) as s:
                peak = s.peak(device=0)["devices"][0]
                step = peak["allocated"]["step"]
                c = s.allocations(0)
                alive = sum(int(c["size"][i]) for i in range(len(c["size"]))
                            if c["alloc_step"][i] <= step < c["free_step"][i])
                self.assertEqual(alive, peak["allocated"]["bytes"])
                self.assertEqual(len(set(len(v) for v in c.values())), 1)
                self.assertTrue(set(c["category"]) <= {"parameter", "gradient", "optimizer_state", "activation",
                                                       "input", "temporary", "autograd_detail", "unknown"})
                self.assertTrue(any(site.startswith("gen_") for site in c["site"]))

    @unittest.skipUnless(shutil.which("true") and __import__("importlib").util.find_spec("pandas"), "no pandas")
    def test_dataframe(self):
        import numpy as np
        with allocscope.load(FIXTURES / "resnet50_train.pickle") as s:
            df = s.dataframe()
            c = s.allocations()
            self.assertEqual(len(df), len(c["size"]))
            self.assertEqual(df["size"].dtype, np.uint64)
            by_cat = df.groupby("category", observed=True)["size"].sum()
            self.assertEqual(int(by_cat.sum()), int(np.sum(c["size"])))


@unittest.skipUnless((Path(allocscope.__file__).parent / "_data").exists(), "run from a source tree, not installed")
class Installed(unittest.TestCase):
    def test_the_package_carries_its_native_files(self):
        from allocscope import _paths
        self.assertTrue(str(_paths.library()).startswith(str(_paths.DATA)), _paths.library())
        self.assertTrue(str(_paths.binary()).startswith(str(_paths.DATA)), _paths.binary())
        self.assertTrue((_paths.DATA / "share" / "allocscope" / "site" / "index.html").exists())
        self.assertTrue((_paths.DATA / "share" / "allocscope" / "site" / "allocscope.wasm").exists())
        if (_paths.DATA / "lib" / "liballocscope_capture.so").exists():
            self.assertTrue((_paths.DATA / "share" / "allocscope" / "python" / "sitecustomize.py").exists())
            self.assertTrue((_paths.DATA / "lib" / "libunwind.so.8").exists())

    def test_console_command(self):
        exe = console()
        p = subprocess.run([str(exe), "summary", str(FIXTURES / "oom.pickle"), "--json"], capture_output=True,
                           text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        with allocscope.load(FIXTURES / "oom.pickle") as s:
            self.assertEqual(json.loads(p.stdout), dict(s.summary()))
        p = subprocess.run([str(exe), "view", "--help"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0)

    def test_the_installed_tool_finds_its_viewer(self):
        # `plot` from the installed tree alone (no source tree, no --web-root): the page it writes carries the wasm.
        exe = console()
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "r.html"
            p = subprocess.run([str(exe), "plot", str(FIXTURES / "oom.pickle"), "-o", str(out)],
                               capture_output=True, text=True, cwd=d)
            self.assertEqual(p.returncode, 0, p.stderr)
            page = out.read_text()
            self.assertIn('id="allocscope-wasm"', page)
            with allocscope.load(FIXTURES / "oom.pickle") as s:
                self.assertIn('id="allocscope-wasm"', s.html())
                self.assertIn("<iframe", s._repr_html_())
                self.assertIn("&lt;script", s._repr_html_())  # the page is escaped into srcdoc, not spliced in
                self.assertIn("  window: null,", s.html())
            # A window loaded in Python is the window the inline viewer opens (the page's loader reads it), and the
            # command a too-large file points to opens the same one.
            with allocscope.load(FIXTURES / "resnet50_train.pickle", from_step=4000, to_step="6000") as s:
                self.assertIn('  window: {"from":"4000","to":"6000"},', s.html())
                limit = allocscope._snapshot.INLINE_LIMIT_BYTES
                allocscope._snapshot.INLINE_LIMIT_BYTES = 1
                try:
                    self.assertIn("allocscope view --from 4000 --to 6000 ", s._repr_html_())
                finally:
                    allocscope._snapshot.INLINE_LIMIT_BYTES = limit
            p = subprocess.run([str(exe), "plot", str(FIXTURES / "resnet50_train.pickle"), "-o", str(out), "--from", "4k"],
                               capture_output=True, text=True, cwd=d)
            self.assertEqual(p.returncode, 1)
            self.assertIn("unknown unit 'k'", p.stderr)

    def test_check_gate(self):
        base, new = FIXTURES / "resnet50_train.pickle", FIXTURES / "transformer_leak.pickle"
        a = allocscope.check(base, new)
        self.assertFalse(a.ok)
        self.assertEqual(a.exit_code, 3)
        self.assertTrue(any("transformer_leak" in r for r in a["regressions"]))
        self.assertTrue(allocscope.check(base, base).ok)


if __name__ == "__main__":
    unittest.main()
