# A CuPy job for the owners check: arrays through CuPy's default memory pool, a matmul (cuBLAS), some freed (kept
# by the pool). Writes the pool's own totals at the end to LABEL (JSON). usage: python3 cupy_job.py LABEL.json
import json, sys
import cupy as cp

pool = cp.get_default_memory_pool()
keep = []
for i in range(8):
    a = cp.random.random((1024 + 256 * i, 1024), dtype=cp.float32)
    b = a @ a.T
    keep.append(b if i % 2 == 0 else None)
    del a
big = cp.zeros((64 << 20) // 4, dtype=cp.float32)
del big
cp.cuda.Device().synchronize()
label = {"job": "cupy", "pool_total_bytes": pool.total_bytes(), "pool_used_bytes": pool.used_bytes(),
         "pool_free_bytes": pool.free_bytes(), "cupy": cp.__version__}
json.dump(label, open(sys.argv[1], "w"), indent=1)
print(label)
