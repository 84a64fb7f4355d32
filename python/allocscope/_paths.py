"""Where allocscope's native files are: inside the installed package (``_data``, laid out as ``cmake --install``
lays out a prefix), or, when the package is imported from a source tree, that tree's builds."""
import os
from pathlib import Path

_HERE = Path(__file__).resolve().parent
DATA = _HERE / "_data"
_SOURCE = _HERE.parent.parent  # python/allocscope -> the repository, when not installed


def _first(candidates):
    for c in candidates:
        if c and Path(c).exists():
            return Path(c)
    return None


def _env(name):
    value = os.environ.get(name)
    return Path(value) if value else None


def library():
    """liballocscope.so, the answers' C ABI."""
    return _first([_env("ALLOCSCOPE_LIBRARY"), DATA / "lib" / "liballocscope.so",
                   _SOURCE / "build" / "default" / "native" / "liballocscope.so"])


def binary():
    """The ``allocscope`` command-line tool."""
    return _first([_env("ALLOCSCOPE_BINARY"), DATA / "bin" / "allocscope",
                   _SOURCE / "build" / "default" / "native" / "allocscope"])


def capture_library():
    """liballocscope_capture.so (only where it was built with the CUDA toolkit)."""
    return _first([_env("ALLOCSCOPE_CAPTURE_LIBRARY"), DATA / "lib" / "liballocscope_capture.so",
                   _SOURCE / "build" / "default" / "native" / "liballocscope_capture.so"])


def site():
    """The viewer's static site (index.html, its modules and the WebAssembly core)."""
    return _first([_env("ALLOCSCOPE_SITE"), DATA / "share" / "allocscope" / "site",
                   _SOURCE / "build" / "wasm" / "site"])
