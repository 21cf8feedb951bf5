"""Sinusoid regression tasks exactly as in the paper (section 5.1), the embedded default.

A task is y = A sin(x - phi) with amplitude A ~ U[0.1, 5], phase phi ~ U[0, pi]; its points have
x ~ U[-5, 5]. A task gives K support points (the inner loop's D_tr) and its query points (D_ts).

Every batch is a whole meta-batch ``(xs, ys, xq, yq)``: xs, ys (T, K, 1), xq, yq (T, Q, 1).
Training meta-batch i of epoch e is drawn from a generator seeded by (seed, e, i), so a resumed run
sees the same tasks. Validation and test tasks are fixed by ``eval_seed`` (the same for every
training seed, so runs are compared on the same 600 test tasks); they are evaluated on
``eval_query`` points each, spread over [-5, 5] at random.
"""

from __future__ import annotations

import dataclasses
import math

import torch
from torch.utils.data import DataLoader, Dataset

from zoo.core.data import EpochSampler, ResumableLoader, ZooDataModule
from zoo.errors import UserError
from zoo.models.maml.config import SinusoidConfig


def sample_sinusoids(n: int, points: int, g: torch.Generator, amplitude=(0.1, 5.0), phase=(0.0, math.pi),
                     x_range=(-5.0, 5.0)) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """n tasks with ``points`` points each: x (n, points, 1), y (n, points, 1), amplitude (n,), phase (n,)."""
    amp = torch.empty(n).uniform_(*amplitude, generator=g)  # cpu: task data, moved by Lightning
    ph = torch.empty(n).uniform_(*phase, generator=g)  # cpu: task data
    x = torch.empty(n, points, 1).uniform_(*x_range, generator=g)  # cpu: task data
    y = amp[:, None, None] * torch.sin(x - ph[:, None, None])
    return x, y, amp, ph


class SinusoidMetaBatches(Dataset):
    """Item (i, epoch): meta-batch i of that epoch, drawn from a generator keyed by (seed, epoch, i)."""

    def __init__(self, cfg: SinusoidConfig):
        self.cfg = cfg

    def __len__(self) -> int:
        return self.cfg.steps_per_epoch

    def with_tasks(self, n: int) -> SinusoidMetaBatches:
        """The same meta-batches with n tasks each (to measure a step's memory on a few)."""
        return SinusoidMetaBatches(dataclasses.replace(self.cfg, meta_batch=n))

    def __getitem__(self, key) -> tuple[torch.Tensor, ...]:
        i, epoch = key if isinstance(key, tuple) else (key, 0)
        c = self.cfg
        g = torch.Generator().manual_seed(c.seed * 1_000_003 + epoch * 100_019 + int(i))  # cpu: datamodule
        x, y, _, _ = sample_sinusoids(c.meta_batch, c.shots + c.query, g, c.amplitude, c.phase, c.x_range)
        return x[:, :c.shots], y[:, :c.shots], x[:, c.shots:], y[:, c.shots:]  # (T, K, 1) x2, (T, Q, 1) x2


class FixedTasks(Dataset):
    """Fixed evaluation tasks, served ``per_batch`` tasks at a time (each item is a meta-batch)."""

    def __init__(self, tensors: tuple[torch.Tensor, ...], per_batch: int):
        self.tensors, self.per_batch = tensors, per_batch

    def __len__(self) -> int:
        return math.ceil(len(self.tensors[0]) / self.per_batch)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, ...]:
        if not 0 <= i < len(self):
            raise IndexError(i)
        s = slice(i * self.per_batch, (i + 1) * self.per_batch)
        return tuple(t[s] for t in self.tensors)


def check_positive(**values: int) -> None:
    for name, v in values.items():
        if v < 1:
            raise UserError(f"data.{name}={v} must be at least 1")


class EpisodeData(ZooDataModule):
    """Datasets whose items are whole meta-batches of tasks (``train_set``, ``val_set``, ``test_set``; Config
    with ``seed`` and ``num_workers``): the loaders pass them through unbatched, training's keyed by epoch."""

    def train_dataloader(self) -> DataLoader:
        sampler = EpochSampler(len(self.train_set), self.cfg.seed, shuffle=False, tag_epoch=True)  # tasks keyed by both
        return ResumableLoader(self.train_set, batch_size=None, sampler=sampler, num_workers=self.cfg.num_workers)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val_set, batch_size=None, shuffle=False, num_workers=self.cfg.num_workers)

    def test_dataloader(self) -> DataLoader:
        return DataLoader(self.test_set, batch_size=None, shuffle=False, num_workers=self.cfg.num_workers)


class SinusoidData(EpisodeData):
    """Sinusoid regression tasks (MAML paper 5.1): A ~ U[0.1, 5], phi ~ U[0, pi], x ~ U[-5, 5] (generated)."""

    Config = SinusoidConfig

    def setup(self, stage: str | None = None) -> None:
        if getattr(self, "train_set", None) is not None:
            return
        c = self.cfg
        check_positive(shots=c.shots, query=c.query, eval_query=c.eval_query, meta_batch=c.meta_batch,
                       steps_per_epoch=c.steps_per_epoch, val_tasks=c.val_tasks, test_tasks=c.test_tasks,
                       eval_batch_tasks=c.eval_batch_tasks)
        self.train_set = SinusoidMetaBatches(c)
        self.val_set = FixedTasks(self.fixed_tasks(c.val_tasks, c.eval_seed), c.eval_batch_tasks)
        self.test_set = FixedTasks(self.fixed_tasks(c.test_tasks, c.eval_seed + 1), c.eval_batch_tasks)

    def fixed_tasks(self, n: int, seed: int) -> tuple[torch.Tensor, ...]:
        c = self.cfg
        g = torch.Generator().manual_seed(seed)  # cpu: datamodule (fixed evaluation tasks)
        x, y, _, _ = sample_sinusoids(n, c.shots + c.eval_query, g, c.amplitude, c.phase, c.x_range)
        return x[:, :c.shots], y[:, :c.shots], x[:, c.shots:], y[:, c.shots:]

    def info(self) -> dict:
        c = self.cfg
        return {"task": "regression", "in_dim": 1, "out_dim": 1, "shots": c.shots,
                "amplitude": list(c.amplitude), "phase": list(c.phase), "x_range": list(c.x_range)}
