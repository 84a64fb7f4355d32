"""Builds the native half of the Python package with CMake: the `allocscope` tool, liballocscope (the answers' C ABI,
which the module loads with ctypes), the capture library where the CUDA toolkit is found, and the viewer's site,
then lays them out in the package as `cmake --install` lays out a prefix (allocscope/_data/{bin,lib,share}).

Environment:
  ALLOCSCOPE_BUILD_DIR   a CMake build to use (default build/python, configured here without tests); an existing
                         build (build/default) is built further, not reconfigured
  ALLOCSCOPE_SITE_DIR    an assembled viewer site (default build/wasm/site, else built here with Emscripten in
                         build/python-wasm)
  ALLOCSCOPE_NO_VIEWER=1 install without the viewer (the notebook view and `allocscope view`/`plot` then need one)
"""
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

try:
    from wheel.bdist_wheel import bdist_wheel
except ImportError:  # pip's own wheel building brings it; a plain `setup.py build` does without
    bdist_wheel = None

ROOT = Path(__file__).resolve().parent


def run(cmd, env=None):
    print("allocscope setup: " + " ".join(str(c) for c in cmd), flush=True)
    subprocess.check_call([str(c) for c in cmd], cwd=ROOT, env=env)


def native_build():
    build = Path(os.environ.get("ALLOCSCOPE_BUILD_DIR") or ROOT / "build" / "python")
    if not (build / "CMakeCache.txt").exists():
        run(["cmake", "-S", ROOT, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
             "-DALLOCSCOPE_TESTS=OFF", "-DALLOCSCOPE_BENCH=OFF"])
    run(["cmake", "--build", build])
    return build


def viewer_site():
    if os.environ.get("ALLOCSCOPE_NO_VIEWER") == "1":
        return None
    site = Path(os.environ.get("ALLOCSCOPE_SITE_DIR") or ROOT / "build" / "wasm" / "site")
    if (site / "index.html").exists() and (site / "allocscope.wasm").exists():
        return site
    if shutil.which("emcmake") is None and not Path("/usr/share/emscripten").exists():
        sys.exit("allocscope setup: the viewer is built with Emscripten, which is not installed (Debian: apt install "
                 "emscripten), and no built site was found at %s. Build it (cmake --workflow --preset wasm), set "
                 "ALLOCSCOPE_SITE_DIR, or set ALLOCSCOPE_NO_VIEWER=1 to install without it." % site)
    build = ROOT / "build" / "python-wasm"
    env = dict(os.environ, NODE_PATH=os.environ.get("NODE_PATH", "/usr/share/nodejs"))
    if not (build / "CMakeCache.txt").exists():
        run(["cmake", "-S", ROOT, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
             "-DCMAKE_TOOLCHAIN_FILE=/usr/share/emscripten/cmake/Modules/Platform/Emscripten.cmake",
             "-DALLOCSCOPE_TESTS=OFF", "-DALLOCSCOPE_BENCH=OFF"], env=env)
    run(["cmake", "--build", build], env=env)
    return build / "site"


def bundle_unwind(lib_dir):
    """The capture library needs libunwind, which a machine without its -dev package may lack: copy the one it
    was linked against beside it (its RUNPATH starts with $ORIGIN)."""
    capture = lib_dir / "liballocscope_capture.so"
    if not capture.exists() or (lib_dir / "libunwind.so.8").exists():
        return
    out = subprocess.run(["ldd", str(capture)], capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0].startswith("libunwind.so") and "=>" in parts and len(parts) > 2:
            shutil.copy2(os.path.realpath(parts[2]), lib_dir / parts[0])


class BuildWithNative(build_py):
    def run(self):
        super().run()
        data = Path(self.build_lib) / "allocscope" / "_data"
        if data.exists():
            shutil.rmtree(data)
        build = native_build()
        run(["cmake", "--install", build, "--prefix", data])
        # The site installed is the one `cmake --install` was configured with; the one found here wins.
        site = viewer_site()
        target = data / "share" / "allocscope" / "site"
        if target.exists():
            shutil.rmtree(target)
        if site is not None:
            shutil.copytree(site, target)
        bundle_unwind(data / "lib")
        shutil.rmtree(data / "include", ignore_errors=True)  # headers are for C users of a cmake install


cmdclass = {"build_py": BuildWithNative}
if bdist_wheel is not None:
    class PlatformWheel(bdist_wheel):
        """Native files inside, no Python extension: a py3-none-PLATFORM wheel, for any CPython 3."""

        def finalize_options(self):
            super().finalize_options()
            self.root_is_pure = False

        def get_tag(self):
            return "py3", "none", sysconfig.get_platform().replace("-", "_").replace(".", "_")
    cmdclass["bdist_wheel"] = PlatformWheel

setup(cmdclass=cmdclass)
