#!/usr/bin/env python3
"""`allocscope record -- python3 ...` loads allocscope's bootstrap (a sitecustomize) and still runs the user's own
sitecustomize; `--no-torch` leaves the interpreter alone; a job without CUDA writes nothing. (The PyTorch part needs
a GPU: tests/capture/pyframes/run_gpu.sh checks it.) usage: bootstrap_test.py ALLOCSCOPE. Exit 77 when `record`
cannot run here (no capture library built)."""
import os
import subprocess
import sys
import tempfile

allocscope = sys.argv[1]
failed = 0


def check(cond, what):
    global failed
    print(("  ok   " if cond else "  FAIL ") + what)
    failed += 0 if cond else 1


# The bootstrap's import watch (it hooks torch when torch is imported): a library that first asks whether a module
# is installed (importlib.util.find_spec, as transformers and accelerate do for torch) must not use the watch up,
# and the hook runs once, when the module is executed. Checked on a module of our own in a temporary folder.
bootstrap = os.path.join(os.path.dirname(allocscope), "python", "sitecustomize.py")
watch_job = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("allocscope_bootstrap_under_test", sys.argv[1])
boot = importlib.util.module_from_spec(spec)
spec.loader.exec_module(boot)
seen = []
boot._when_imported("allocscope_watch_probe", lambda m: seen.append(m.VALUE))
print(importlib.util.find_spec("allocscope_watch_probe") is not None, seen == [])
import allocscope_watch_probe
importlib.reload(allocscope_watch_probe)
print(seen == [42], sum(isinstance(f, boot._Watch) for f in sys.meta_path) == 0)
"""
with tempfile.TemporaryDirectory(prefix="allocscope_watch_") as d:
    with open(os.path.join(d, "allocscope_watch_probe.py"), "w") as f:
        f.write("VALUE = 42\n")
    r = subprocess.run([sys.executable, "-c", watch_job, bootstrap], env=dict(os.environ, PYTHONPATH=d),
                       capture_output=True, text=True)
    check(os.path.isfile(bootstrap), "the built bootstrap is next to allocscope (%s)" % bootstrap)
    check(r.returncode == 0 and r.stdout.split() == ["True", "True", "True", "True"],
          "a find_spec before the import leaves the watch; the hook runs once, at the import (%s %s)"
          % (r.stdout.strip(), r.stderr.strip()[-300:]))

probe = ("import builtins, sys; m = sys.modules.get('sitecustomize'); "
         "print(getattr(builtins, 'user_site_ran', False), m.__file__ if m else None, "
         "sys.modules.get('_allocscope_chained_sitecustomize') is not None)")
with tempfile.TemporaryDirectory(prefix="allocscope_bootstrap_") as d:
    user = os.path.join(d, "user")
    os.mkdir(user)
    with open(os.path.join(user, "sitecustomize.py"), "w") as f:
        f.write("import builtins\nbuiltins.user_site_ran = True\n")
    env = dict(os.environ, PYTHONPATH=user)
    out = os.path.join(d, "job.pickle")
    r = subprocess.run([allocscope, "record", "-o", out, "--", sys.executable, "-c", probe], env=env,
                       capture_output=True, text=True)
    if "was not built" in r.stderr:
        print("SKIP: " + r.stderr.strip())
        sys.exit(77)
    ran, site_file, chained = r.stdout.split() if r.returncode == 0 else ("?", "?", "?")
    check(r.returncode == 0, "the job ran under record (%d, %s)" % (r.returncode, r.stderr.strip()[-200:]))
    check(site_file.endswith("/python/sitecustomize.py") and not site_file.startswith(user),
          "the interpreter loaded allocscope's bootstrap (%s)" % site_file)
    check(ran == "True" and chained == "True", "and the bootstrap ran the user's own sitecustomize")
    check(not os.path.exists(out) and not os.path.exists(os.path.join(d, "job.torch.pickle")),
          "a job that never used CUDA wrote no snapshot")
    check("allocscope bootstrap" not in r.stderr, "the bootstrap said nothing (no torch imported)")
    check("allocscope record: every CUDA allocation through " in r.stderr and "trace ring of 100000 entries" in r.stderr
          and "allocscope record: Python jobs: bootstrap " in r.stderr,
          "record said at start what it will see: the library, the ring, the bootstrap (%s)" % r.stderr.strip()[:300])

    r = subprocess.run([allocscope, "record", "--no-torch", "-o", out, "--", sys.executable, "-c", probe], env=env,
                       capture_output=True, text=True)
    ran, site_file, chained = r.stdout.split() if r.returncode == 0 else ("?", "?", "?")
    check(r.returncode == 0 and site_file.startswith(user) and ran == "True",
          "--no-torch: the user's sitecustomize is the interpreter's own (%s)" % site_file)
    check("--no-torch: in Python jobs PyTorch's own recorder stays off" in r.stderr, "and record said so at start")

    # `allocscope` copied without its python/ folder (an audit's case): record says it will not see PyTorch's tensors,
    # and tells the capture, which writes why into the file.
    copy = os.path.join(d, "copy")
    os.mkdir(copy)
    lib = os.path.join(os.path.dirname(allocscope), "liballocscope_capture.so")
    if os.path.exists(lib):
        import shutil
        shutil.copy(allocscope, copy)
        shutil.copy(lib, copy)
        env_job = "import os; print(os.environ.get('ALLOCSCOPE_TORCH'), '|', os.environ.get('ALLOCSCOPE_TORCH_OFF'))"
        r = subprocess.run([os.path.join(copy, "allocscope"), "record", "-o", out, "--", sys.executable, "-c", env_job],
                           env=env, capture_output=True, text=True)
        check("WARNING: no Python bootstrap found" in r.stderr and "no tensors" in r.stderr,
              "without python/ beside it, record warns at start (%s)" % r.stderr.strip()[-300:])
        check(r.stdout.strip() == "None | allocscope record found no Python bootstrap (python/sitecustomize.py beside "
              "it, or ../share/allocscope/python)", "and the job's capture is told why (%s)" % r.stdout.strip())

    # A user sitecustomize that raises: the job still runs, and the bootstrap says which one failed.
    with open(os.path.join(user, "sitecustomize.py"), "w") as f:
        f.write("raise RuntimeError('broken site')\n")
    r = subprocess.run([allocscope, "record", "-o", out, "--", sys.executable, "-c", "print('job ran')"], env=env,
                       capture_output=True, text=True)
    check(r.returncode == 0 and "job ran" in r.stdout and "broken site" in r.stderr,
          "a failing user sitecustomize is reported and the job runs (%s)" % r.stderr.strip()[-120:])
print("%d failed" % failed)
sys.exit(1 if failed else 0)
