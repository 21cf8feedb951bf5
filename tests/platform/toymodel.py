"""A tiny model + datamodule plugged in by dotted path (``toymodel:Toy``), so the platform's tests
do not depend on any zoo model. Training uses dropout, so it consumes the RNG like real models."""

import os
import signal
import time
from dataclasses import dataclass

import lightning as L
import torch
from torch import nn
from torch.utils.data import TensorDataset

from zoo.core.data import ZooDataModule, plain_loader, shuffled_loader
from zoo.core.module import ZooModule


@dataclass
class ToyDataConfig:
    n: int = 256  # examples
    dim: int = 8  # input features
    batch_size: int = 32  # examples per batch
    seed: int = 0  # data + shuffle seed
    root: str = "data"  # unused; kept for the convention


class ToyData(ZooDataModule):
    """Linear regression data y = x @ w + noise."""

    Config = ToyDataConfig

    def setup(self, stage=None):
        g = torch.Generator().manual_seed(self.cfg.seed)
        x = torch.randn(self.cfg.n, self.cfg.dim, generator=g)
        y = x @ torch.linspace(-1, 1, self.cfg.dim) + 0.1 * torch.randn(self.cfg.n, generator=g)
        self.train_set = TensorDataset(x, y)
        self.val_set = TensorDataset(x[:64], y[:64])

    def info(self):
        return {"dim": self.cfg.dim}

    def train_dataloader(self):
        return shuffled_loader(self.train_set, self.cfg.batch_size, seed=self.cfg.seed)

    def val_dataloader(self):
        return plain_loader(self.val_set, 64)

    test_dataloader = val_dataloader


@dataclass
class ToyConfig:
    hidden: int = 16  # hidden units
    lr: float = 0.05  # SGD learning rate
    dropout: float = 0.2  # consumes RNG during training
    explode_at: int = -1  # step at which the loss becomes NaN (tests the guard); -1 never
    step_delay: float = 0.0  # seconds to sleep per step, so tests can kill a run mid-way
    val_delay: float = 0.0  # seconds to sleep per validation step (not the sanity check), touching val_started first
    val_started: str = ""  # file touched when a validation step begins, so tests can signal a run mid-validation
    val_draws: bool = False  # validation draws from torch's RNG (as the OOD model's does), changing training's draws
    test_delay: float = 0.0  # seconds to sleep per test step, touching test_started first
    test_started: str = ""  # file touched when a test step begins, so tests can signal a run mid-test


class Toy(ZooModule):
    """Tiny MLP regressor for platform tests."""

    Config = ToyConfig

    def __init__(self, cfg, data_info=None):
        super().__init__(cfg, data_info)
        self.net = nn.Sequential(nn.Linear(self.data_info["dim"], self.cfg.hidden), nn.ReLU(),
                                 nn.Dropout(self.cfg.dropout), nn.Linear(self.cfg.hidden, 1))

    def loss(self, batch):
        x, y = batch
        return ((self.net(x).squeeze(-1) - y) ** 2).mean()

    def training_step(self, batch, batch_idx):
        loss = self.loss(batch)
        if self.cfg.step_delay:
            time.sleep(self.cfg.step_delay)
        if self.global_step == self.cfg.explode_at:
            loss = loss * float("nan")
        self.log_train({"train/loss": loss})
        return loss

    def log(self, name, *args, **kwargs):
        self.train_log_calls = getattr(self, "train_log_calls", 0) + name.startswith("train/")
        super().log(name, *args, **kwargs)

    def validation_step(self, batch, batch_idx):
        if self.cfg.val_delay and not self.trainer.sanity_checking:
            if self.cfg.val_started:
                open(self.cfg.val_started, "a").close()
            time.sleep(self.cfg.val_delay)
        if self.cfg.val_draws:
            torch.rand(1)  # cpu: a draw from the global RNG, as a model's sampling in validation makes
        self.log("val/loss", self.loss(batch))

    def on_validation_epoch_end(self):
        if self.trainer.sanity_checking:
            return
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots()
        ax.plot(self.net[0].weight.detach().flatten().numpy())
        self.save_figure("weights", fig)
        self.save_image("weights_image", self.net[0].weight.detach().abs()[None, None].clamp(0, 1))

    def test_step(self, batch, batch_idx):
        if self.cfg.test_started:
            open(self.cfg.test_started, "a").close()
        time.sleep(self.cfg.test_delay)
        self.log("test/loss", self.loss(batch))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.cfg.lr)

    def predict_cli(self, inputs, options):
        x = torch.tensor([[float(v) for v in inputs]])
        print(f"{self.net(x).item():.4f}")


class Toy2(Toy):
    """Another model, to test that a checkpoint of one model is refused by another."""


class SignalAt(L.Callback):
    """Sends this process SIGTERM at the end of training step ``step`` (global step after it): a
    signal at a known place in an epoch (``callbacks=[{name: "toymodel:SignalAt", step: 11}]``)."""

    def __init__(self, step: int):
        self.step = step

    def on_train_batch_end(self, trainer, *args):
        if trainer.global_step == self.step:
            os.kill(os.getpid(), signal.SIGTERM)


class KillAt(SignalAt):
    """Sends this process SIGKILL at the end of training step ``step``: a crash, no save (run it in a subprocess)."""

    def on_train_batch_end(self, trainer, *args):
        if trainer.global_step == self.step:
            os.kill(os.getpid(), signal.SIGKILL)


class StopAfterEpoch(L.Callback):
    """Stops training cleanly at the end of epoch ``epoch`` (as early stopping does): the run's final save is an
    epoch-end checkpoint, with the run's settings (``trainer.max_epochs`` unchanged) and no signal."""

    def __init__(self, epoch: int):
        self.epoch = epoch

    def on_train_epoch_end(self, trainer, *args):
        if trainer.current_epoch == self.epoch:
            trainer.should_stop = True
