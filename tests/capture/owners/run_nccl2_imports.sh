#!/usr/bin/env bash
# On a two-GPU machine: does the capture mark NCCL's mappings of its peer's buffers itself (cuMemMap of a handle from
# cuMemImportFromShareableHandle -> metadata "api=cuMemMap(imported)"), so that they are left out without NCCL's
# symbols? The DDP job as two torchrun ranks under `allocscope record`, PyTorch's recorder off (the capture's own
# file), then, per rank, the marked mappings counted with Python's pickle against the stack rule's, and `summary`.
# Output: OUT_DIR/rank%r.pickle.gz and the log. usage: tests/capture/owners/run_nccl2_imports.sh STAGE_DIR OUT_DIR
set -u
. "$(dirname "$0")/../stage_env.sh" "$1" "$2"
job=tests/capture/owners/nccl_job.py
nvidia-smi -L
ALLOCSCOPE_TORCH_RECORDER=0 "$S/allocscope" record -o "$O/rank%r.pickle.gz" -- \
  torchrun --nproc_per_node=2 --master_port=29621 $job "$O/rank%r.label.json" 2>&1 | grep -v "^W1\|OMP_NUM" | tail -6
for r in 0 1; do
  echo "-- rank $r"
  python3 - "$O/rank$r.pickle.gz" <<'PY'
import gzip, pickle, sys
d = pickle.load(gzip.open(sys.argv[1]))
marked = by_stack = both = 0; marked_bytes = 0
for e in (e for trace in d["device_traces"] for e in trace):  # rank r's GPU is device r
    if e["action"] != "alloc": continue
    m = e.get("user_metadata", "").startswith("api=cuMemMap(imported)")
    s = any("ImportShareableBuffer" in f["name"] for f in e.get("frames") or [])
    marked += m; by_stack += s; both += m and s; marked_bytes += e["size"] if m else 0
print({"marked": marked, "marked_bytes": marked_bytes, "by_stack": by_stack, "both": both,
       "imported_handles": [s for s in d["allocator_settings"]["allocscope_capture"].get("imported_handles", [])][:3]})
PY
  "$S/allocscope" summary "$O/rank$r.pickle.gz" 2>&1 | grep -A4 "by owner\|warnings:"
done
