# Proof job 1: a Hugging Face GPT-2 built from its config (no download), trained with bf16 autocast and AdamW. Its
# largest allocation at the backward peak is the logits' gradient, made on the autograd engine's threads.
# usage: python3 hf_gpt2.py LABEL.json
import os, sys
import torch
from transformers import GPT2Config, GPT2LMHeadModel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Label, torch_counters

label = Label("hf_gpt2", __file__, torch.cuda.synchronize)
torch.manual_seed(0)
config = GPT2Config(n_layer=6, n_embd=768, n_head=12, n_positions=512)
model = GPT2LMHeadModel(config).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for step in range(10):
    ids = torch.randint(0, config.vocab_size, (8, 512), device="cuda")
    label.step_start()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    label.step_end()
label.write(**torch_counters(torch))
