"""Writes the notebook the Jupyter test executes: load a snapshot, show it (the viewer), show an answer."""
import sys

import nbformat

path, out = sys.argv[1], sys.argv[2]
nb = nbformat.v4.new_notebook()
nb.cells = [
    nbformat.v4.new_code_cell("import allocscope\nsnap = allocscope.load(%r)\nsnap" % path),
    nbformat.v4.new_code_cell("snap.summary()"),
]
nbformat.write(nb, out)
