"""GPU proof of the Python module (issue 41), run on the GPU machine: `python3 scenarios.py OUT_DIR [NAME...]`.

Each scenario runs in its own process (a fresh CUDA context and caching allocator) and prints one JSON line of what
it measured; OUT_DIR keeps the snapshots written. The oracles: PyTorch's own counters (requested_bytes.all.peak,
max_memory_reserved), the out-of-memory errors the scenarios provoke on purpose (their cause is known by
construction), and a leak planted at a known line.
"""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
GiB = 1 << 30


def mlp(torch, width=4096, depth=4):
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers).cuda()


# -- scenarios: each returns a dict ------------------------------------------------------------------------------
def record_plain(out):
    """A training loop inside `with allocscope.record()`: the file's peaks against PyTorch's counters."""
    import torch
    import allocscope
    model = mlp(torch)
    opt = torch.optim.AdamW(model.parameters())
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    path = os.path.join(out, "record_plain.pickle.gz")
    with allocscope.record(path) as rec:
        for _ in range(5):
            x = torch.randn(2048, 4096, device="cuda")
            loss = model(x).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
        torch.cuda.synchronize()
        stats = torch.cuda.memory_stats()
    snap = allocscope.load(path)
    peak = snap.peak(device=0)["devices"][0]
    summary = snap.summary()
    return {"path": path, "capture": rec._capture is not None,
            "requested_peak_torch": stats["requested_bytes.all.peak"], "requested_peak_file": peak["allocated"]["bytes"],
            "reserved_peak_torch": stats["reserved_bytes.all.peak"], "reserved_peak_file": peak["reserved"]["bytes"],
            "owners": peak.get("owners"), "warnings": summary.get("warnings")}


def record_oom_live(out):
    """20 GiB tensors kept until the GPU is full: the cause is the live tensors, the largest at this line."""
    import torch
    import allocscope
    path = os.path.join(out, "record_oom_live.pickle.gz")
    kept = []
    rec = allocscope.record(path, capture=False)
    t0 = time.time()
    try:
        with rec:
            while True:
                kept.append(torch.empty(20 * GiB, dtype=torch.uint8, device="cuda"))  # KEEP-LINE
    except torch.cuda.OutOfMemoryError:
        pass
    n = len(kept)
    del kept
    ans = rec.oom_answer or {}
    oom = (ans.get("ooms") or [{}])[0]
    return {"path": rec.oom_path, "exists": bool(rec.oom_path and os.path.exists(rec.oom_path)), "tensors": n,
            "cause": oom.get("cause"), "expected_cause": "live_tensors", "seconds": time.time() - t0,
            "top_site": json.dumps(oom.get("largest_live", [])[:1])[:300]}


def record_oom_too_large(out):
    """One request larger than the GPU: request_too_large."""
    import torch
    import allocscope
    path = os.path.join(out, "record_oom_big.pickle.gz")
    rec = allocscope.record(path, capture=False)
    try:
        with rec:
            torch.empty(400 * GiB, dtype=torch.uint8, device="cuda")
    except torch.cuda.OutOfMemoryError:
        pass
    oom = ((rec.oom_answer or {}).get("ooms") or [{}])[0]
    return {"path": rec.oom_path, "cause": oom.get("cause"), "expected_cause": "request_too_large"}


def _lightning_module(torch, pl, width, leak, blowup=0):
    class M(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(),
                                           torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, 10))
            self.kept = []

        def training_step(self, batch, i):
            x, y = batch
            if blowup:  # a batch too large for the GPU, made on the GPU (64 GiB a layer's output)
                x, y = x.repeat(blowup, 1), y.repeat(blowup)  # BLOWUP-LINE
            loss = torch.nn.functional.cross_entropy(self.net(x), y)
            if leak:
                self.kept.append(torch.empty(8 << 20, dtype=torch.uint8, device="cuda"))  # LEAK-LINE
            return loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters())
    return M()


def _loader(torch, n, batch, width):
    x = torch.randn(n, width)
    y = torch.randint(0, 10, (n,))
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=batch)


def _pl():
    try:
        import lightning.pytorch as pl
    except ImportError:
        import pytorch_lightning as pl
    return pl


class _StepTimer:
    def __init__(self, pl):
        outer = self
        self.times = []

        class T(pl.Callback):
            def on_train_batch_start(self, *a):
                import torch
                torch.cuda.synchronize()
                outer.t = time.perf_counter()

            def on_train_batch_end(self, *a):
                import torch
                torch.cuda.synchronize()
                outer.times.append(time.perf_counter() - outer.t)
        self.callback = T()


def lightning(out):
    """Lightning: a fit with the callback against one without (time per step), a planted leak found at its line
    after an epoch, a clean fit with no leak, and an OOM provoked by a batch too large for the GPU."""
    import torch
    import allocscope.lightning as al
    pl = _pl()
    res = {}
    width = 4096

    def fit(callbacks, leak=False, batch=256, n=256 * 40, epochs=1, blowup=0):
        timer = _StepTimer(pl)
        trainer = pl.Trainer(accelerator="gpu", devices=1, max_epochs=epochs, callbacks=callbacks + [timer.callback],
                             logger=False, enable_checkpointing=False, enable_progress_bar=False,
                             enable_model_summary=False)
        trainer.fit(_lightning_module(torch, pl, width, leak, blowup), _loader(torch, n, batch, width))
        steady = sorted(timer.times[5:])
        return steady[len(steady) // 2] if steady else None

    res["step_s_without"] = fit([])
    cb = al.AllocscopeCallback(os.path.join(out, "lightning_clean.pickle.gz"), quiet=True)
    res["step_s_with"] = fit([cb])
    res["clean_leak_ok"] = [a.ok for a in cb.leak_answers]
    res["clean_path"] = cb.path
    cb = al.AllocscopeCallback(os.path.join(out, "lightning_leak.pickle.gz"), quiet=True)
    fit([cb], leak=True, epochs=2)
    res["leak_ok"] = [a.ok for a in cb.leak_answers]
    growing = []
    for a in cb.leak_answers[-1:]:
        for d in a.get("devices", []):
            growing += [g.get("site", {}) for g in d.get("growing", [])]
    res["leak_sites"] = json.dumps(growing)[:400]
    cb = al.AllocscopeCallback(os.path.join(out, "lightning_oom.pickle.gz"))
    try:
        fit([cb], batch=64, n=64 * 4, blowup=1 << 16)  # 4M rows x 4096 floats: 64 GiB a layer's output
        res["oom"] = False
    except torch.cuda.OutOfMemoryError:
        res["oom"] = True
    ans = cb.recording.oom_answer or {}
    res["oom_path"] = cb.path
    res["oom_cause"] = ((ans.get("ooms") or [{}])[0]).get("cause")
    res["expected_cause"] = "live_tensors"
    return res


def _hf(torch, transformers):
    cfg = transformers.GPT2Config(n_layer=4, n_head=8, n_embd=512, vocab_size=50257, n_positions=1024)

    class Data(torch.utils.data.Dataset):
        def __init__(self, n, seq):
            self.n, self.seq = n, seq

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            ids = torch.randint(0, 50257, (self.seq,))
            return {"input_ids": ids, "labels": ids}

    class Timer(transformers.TrainerCallback):
        def __init__(self):
            self.times = []

        def on_step_begin(self, *a, **k):
            torch.cuda.synchronize()
            self.t = time.perf_counter()

        def on_step_end(self, *a, **k):
            torch.cuda.synchronize()
            self.times.append(time.perf_counter() - self.t)

    def train(out, callbacks, batch, steps, seq=512):
        timer = Timer()
        args = transformers.TrainingArguments(output_dir=os.path.join(out, "hf_tmp"), per_device_train_batch_size=batch,
                                              max_steps=steps, report_to=[], save_strategy="no", logging_strategy="no",
                                              disable_tqdm=True, dataloader_num_workers=0, bf16=True)
        trainer = transformers.Trainer(model=transformers.GPT2LMHeadModel(cfg), args=args,
                                       train_dataset=Data(batch * steps, seq), callbacks=callbacks + [timer])
        trainer.train()
        steady = sorted(timer.times[3:])
        return steady[len(steady) // 2] if steady else None
    return train


def _hf_oom(out, name, batch, seq):
    import torch
    import transformers
    import allocscope.huggingface as ah
    train = _hf(torch, transformers)
    cb = ah.AllocscopeCallback(os.path.join(out, name + ".pickle.gz"))
    res = {"transformers": transformers.__version__, "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF")}
    try:
        train(out, [cb], batch, 2, seq=seq)
        res["oom"] = False
    except torch.cuda.OutOfMemoryError:
        res["oom"] = True
    ans = cb.recording.oom_answer or {}
    oom = (ans.get("ooms") or [{}])[0]
    res.update({"oom_path": cb.path, "oom_cause": oom.get("cause"), "oom_requested": oom.get("requested"),
                "oom_event": oom.get("event"), "advice": (oom.get("advice") or "")[:300]})
    return res


def huggingface(out):
    """transformers: a GPT-2 built from its config, trained by Trainer with the callback: the time per step with and
    without it, and an OOM from a batch too large (batch 512 x 1024 tokens: logits of 49 GiB beside the rest)."""
    import torch
    import transformers
    import allocscope.huggingface as ah
    train = _hf(torch, transformers)
    res = {"step_s_without": train(out, [], 16, 25)}
    cb = ah.AllocscopeCallback(os.path.join(out, "hf_clean.pickle.gz"), quiet=True)
    res["step_s_with"] = train(out, [cb], 16, 25)
    res["clean_path"] = cb.path
    return res


def huggingface_oom(out):
    return _hf_oom(out, "hf_oom", 512, 1024)


def huggingface_oom_expandable(out):
    """The same OOM under PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (set by main): the oracle for a
    fragmentation cause. If the request that failed now succeeds, the holes between segments were what stopped it."""
    return _hf_oom(out, "hf_oom_expandable", 512, 1024)


def huggingface_oom_too_large(out):
    """Batch 2048 x 1024 tokens: one logits tensor of 196 GiB, larger than the GPU."""
    return _hf_oom(out, "hf_oom_big", 2048, 1024)


SCENARIOS = {f.__name__: f for f in (record_plain, record_oom_live, record_oom_too_large, lightning, huggingface,
                                     huggingface_oom, huggingface_oom_expandable, huggingface_oom_too_large)}
ENV = {"huggingface_oom_expandable": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}}


def main():
    out = os.path.abspath(sys.argv[1])
    names = sys.argv[2:] or list(SCENARIOS)
    if len(names) == 2 and names[0] == "--one":
        t0 = time.time()
        try:
            r = SCENARIOS[names[1]](out)
            r["ok"] = True
        except Exception as e:
            import traceback
            r = {"ok": False, "error": repr(e), "trace": traceback.format_exc()[-2000:]}
        r["scenario"], r["seconds"] = names[1], round(time.time() - t0, 2)
        print("RESULT " + json.dumps(r, default=str), flush=True)
        return
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "python_gpu.jsonl"), "a") as log:
        for name in names:
            p = subprocess.run([sys.executable, __file__, out, "--one", name], capture_output=True, text=True,
                               timeout=240, env=dict(os.environ, **ENV.get(name, {})))
            lines = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
            r = json.loads(lines[-1][7:]) if lines else {"scenario": name, "ok": False, "rc": p.returncode,
                                                          "stderr": p.stderr[-3000:]}
            r["stderr_tail"] = p.stderr[-1500:]
            log.write(json.dumps(r) + "\n")
            log.flush()
            print(json.dumps({k: v for k, v in r.items() if k not in ("stderr_tail", "trace")})[:1500], flush=True)


if __name__ == "__main__":
    main()
