"""A tiny model + datamodule plugged in by dotted path (``toymodel:Toy``), so the platform's tests
do not depend on any zoo model. Training uses dropout, so it consumes the RNG like real models."""

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import lightning as L
import torch
from torch import nn
from torch.utils.data import TensorDataset

from zoo.callbacks.checkpoints import SignalCheckpoint
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
class FetchedToyDataConfig(ToyDataConfig):
    url: str = ""  # where toy.npy (n x (dim + 1): features, target) is served: the test's server
    md5: str = ""  # its checksum, "md5:<hex>"


class FetchedToyData(ToyData):
    """ToyData whose examples arrive as a file fetched on first use into ``root`` (test_downloads.py)."""

    Config = FetchedToyDataConfig

    def prepare_data(self):
        from zoo.core import downloads as D

        D.DATASETS["toy"] = D.Published("toy", self.cfg.url, (D.Remote("toy.npy", (self.cfg.url,), self.cfg.md5,
                                                                       "2 KB"),))
        D.fetch("toy", Path(self.cfg.root))

    def setup(self, stage=None):
        import numpy as np

        xy = torch.from_numpy(np.load(Path(self.cfg.root) / "toy.npy"))  # (n, dim + 1)
        self.train_set = TensorDataset(xy[:, :-1], xy[:, -1])
        self.val_set = TensorDataset(xy[:16, :-1], xy[:16, -1])


@dataclass
class ToyConfig:
    hidden: int = 16  # hidden units
    lr: float = 0.05  # SGD learning rate
    dropout: float = 0.2  # consumes RNG during training
    explode_at: int = -1  # step at which the loss becomes NaN (tests the guard); -1 never
    hold_at: str = ""  # where the run waits for its test: "step:N" (the training step at global step N), "validation"
    # (the first one after the sanity check) or "test"; "" never. See hold() for the handshake.
    hold_dir: str = ""  # the handshake's folder (a test's tmp_path)
    val_draws: bool = False  # validation draws from torch's RNG (as the OOD model's does), changing training's draws
    lazy: bool = False  # the first layer is nn.LazyLinear, sized at the first batch (a layer of a user's own)
    more_logs: bool = False  # log_train also gets a float, an int and a float16 tensor (on the progress bar), and
    # self.log a value of its own in training_step at every 2nd step (test_step_overhead.py)


class Toy(ZooModule):
    """Tiny MLP regressor for platform tests."""

    Config = ToyConfig
    compiled = ("net",)  # what compile=true compiles (tests/platform/test_compile.py)

    def __init__(self, cfg, data_info=None):
        super().__init__(cfg, data_info)
        first = nn.LazyLinear(self.cfg.hidden) if self.cfg.lazy else nn.Linear(self.data_info["dim"], self.cfg.hidden)
        self.net = nn.Sequential(first, nn.ReLU(),
                                 nn.Dropout(self.cfg.dropout), nn.Linear(self.cfg.hidden, 1))

    def loss(self, batch):
        x, y = batch
        return ((self.net(x).squeeze(-1) - y) ** 2).mean()

    def training_step(self, batch, batch_idx):
        loss = self.loss(batch)
        if self.cfg.hold_at == f"step:{self.global_step}":
            self.hold()
        if self.global_step == self.cfg.explode_at:
            loss = loss * float("nan")
        more = {}
        if self.cfg.more_logs:
            more = {"train/lr": 0.05 / 3, "train/step": self.global_step, "train/half": loss.detach().half()}
            if self.global_step % 2 == 0:
                self.log("train/direct", loss.detach() * 2)
        self.log_train({"train/loss": loss, **more}, prog_bar=("train/half",))
        return loss

    def log(self, name, *args, **kwargs):
        self.train_log_calls = getattr(self, "train_log_calls", 0) + name.startswith("train/")
        super().log(name, *args, **kwargs)

    def validation_step(self, batch, batch_idx):
        if self.cfg.hold_at == "validation" and not self.trainer.sanity_checking and batch_idx == 0:
            self.hold()
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
        if self.cfg.hold_at == "test" and batch_idx == 0:
            self.hold()
        self.log("test/loss", self.loss(batch))

    def hold(self, limit: float = 600.0):
        """Wait here until the test has acted, so that a signal lands in this phase however slowly the test
        runs: touch ``held``, then wait for ``release``; ``signalled`` is touched once the zoo's handler has
        taken a signal (the test's cue to release the run, or to send a second Ctrl-C). A signal that
        raises (Ctrl-C outside training, a second Ctrl-C) ends the wait; ``limit`` only ends a forgotten one."""
        gate = Path(self.cfg.hold_dir)
        handler = next((c for c in self.trainer.callbacks if isinstance(c, SignalCheckpoint)), None)
        (gate / f"held.{self.global_rank}").touch()
        end = time.monotonic() + limit
        while not (gate / "release").exists() and time.monotonic() < end:
            signalled = gate / f"signalled.{self.global_rank}"
            if handler is not None and handler.received is not None and not signalled.exists():
                signalled.touch()
            time.sleep(0.01)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.cfg.lr)

    def predict_cli(self, inputs, options):
        x = torch.tensor([[float(v) for v in inputs]])
        print(f"{self.net(x).item():.4f}")


class ToyMisnamed(Toy):
    """A model whose ``compiled`` names no submodule it has."""

    compiled = ("nett",)


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
