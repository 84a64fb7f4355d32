# Proof job 2: Lightning trains a timm ResNet (random weights, random images) on one GPU, bf16 mixed precision. The
# job's lines are its LightningModule's and the trainer.fit call; backward runs inside Lightning.
# usage: python3 lightning_timm.py LABEL.json
import os, sys
import lightning as L
import timm
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Label, torch_counters

label = Label("lightning_timm", __file__, torch.cuda.synchronize)


class Net(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = timm.create_model("resnet50", pretrained=False, num_classes=100)

    def training_step(self, batch, _):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01, momentum=0.9)


class Timer(L.Callback):
    def on_train_batch_start(self, *args):
        label.step_start()

    def on_train_batch_end(self, *args):
        label.step_end()


data = torch.utils.data.TensorDataset(torch.randn(16 * 64, 3, 160, 160), torch.randint(0, 100, (16 * 64,)))
trainer = L.Trainer(accelerator="gpu", devices=1, max_steps=16, precision="bf16-mixed", logger=False,
                    enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                    callbacks=[Timer()])
trainer.fit(Net(), torch.utils.data.DataLoader(data, batch_size=64))
label.write(**torch_counters(torch))
