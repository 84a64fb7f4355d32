# Proof job 6: CuPy FFTs of image batches through CuPy's default memory pool (cuFFT plans and their work areas
# beside it). Label: the pool's own totals.
# usage: python3 cupy_fft.py LABEL.json
import os, sys
import cupy as cp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Label

pool = cp.get_default_memory_pool()
label = Label("cupy_fft", __file__, cp.cuda.Device().synchronize)
rng = cp.random.default_rng(0)
for i in range(20):
    label.step_start()
    x = rng.standard_normal((16, 1024, 1024), dtype=cp.float32)
    spectrum = cp.fft.rfft2(x)
    power = cp.abs(spectrum) ** 2
    back = cp.fft.irfft2(spectrum * (power > power.mean()), s=x.shape[-2:])
    del x, spectrum, power, back
    label.step_end()
label.write(pool_total_bytes=pool.total_bytes(), pool_used_bytes=pool.used_bytes(), cupy=cp.__version__)
