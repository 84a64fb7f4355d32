"""``allocscope`` (the console command pip installs, and ``python -m allocscope``): runs the bundled tool."""
import os
import sys

from . import _paths


def main():
    binary = _paths.binary()
    if binary is None:
        sys.stderr.write("allocscope: the command-line tool is not installed with this package\n")
        return 1
    os.execv(str(binary), [str(binary)] + sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
