"""MAML's task datamodules: sinusoid regression (below), Omniglot episodes (``OmniglotData``; its files are
read by omniglot.py) and 2-D navigation goals (``Nav2dData``; the environment is nav2d_env.py's).

Sinusoid regression tasks exactly as in the paper (section 5.1), the embedded default.

A task is y = A sin(x - phi) with amplitude A ~ U[0.1, 5], phase phi ~ U[0, pi]; its points have
x ~ U[-5, 5]. A task gives K support points (the inner loop's D_tr) and its query points (D_ts).

Every batch is a whole meta-batch ``(xs, ys, xq, yq)``: xs, ys (T, K, 1), xq, yq (T, Q, 1).
Training meta-batch i of epoch e is drawn from a generator seeded by (seed, e, i), so a resumed run
sees the same tasks. Validation and test tasks are fixed by ``eval_seed`` (the same for every
training seed, so runs are compared on the same 600 test tasks); they are evaluated on
``eval_query`` points each, spread over [-5, 5] at random.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from pathlib import Path

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

from zoo.core.data import EpochSampler, ResumableLoader, ZooDataModule
from zoo.core.downloads import fetch
from zoo.errors import UserError
from zoo.models.maml.config import NAV2D_SPEC, OMNIGLOT_SPEC, SINUSOID_SPEC, Nav2dConfig, OmniglotConfig, SinusoidConfig
from zoo.models.maml.omniglot import SPLITS, find_omniglot, has_split, load_images


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

    spec = SINUSOID_SPEC

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


# ---- Omniglot episodes ------------------------------------------------------------------------
class Episodes(Dataset):
    """Item (i, epoch) -> meta-batch i of that epoch, drawn from a generator keyed by (seed, epoch, i).
    With ``fixed=True`` the items are fixed tasks keyed by i only. A meta-batch is ``(xs, ys, xq, yq)``:
    xs (T, N*K, 1, 28, 28), ys (T, N*K) labels 0..N-1, xq (T, N*Q, 1, 28, 28), yq (T, N*Q)."""

    def __init__(self, images: torch.Tensor, cfg: OmniglotConfig, seed: int, n_batches: int, tasks_per_batch: int,
                 n_tasks: int | None = None):
        self.images, self.cfg, self.seed = images, cfg, seed
        self.n_batches, self.tasks_per_batch, self.n_tasks = n_batches, tasks_per_batch, n_tasks
        self.rotations = 4 if cfg.rotations else 1
        self.n_classes = len(images) * self.rotations

    def __len__(self) -> int:
        return self.n_batches

    def with_tasks(self, n: int) -> Episodes:
        """The same meta-batches with n tasks each (to measure a step's memory on a few)."""
        few = copy.copy(self)
        few.tasks_per_batch = n
        return few

    def __getitem__(self, key) -> tuple[torch.Tensor, ...]:
        i, epoch = key if isinstance(key, tuple) else (key, 0)
        if not 0 <= int(i) < self.n_batches:
            raise IndexError(i)
        c = self.cfg
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch * 100_019 + int(i))  # cpu: datamodule
        T = self.tasks_per_batch
        if self.n_tasks is not None:  # fixed evaluation tasks: the last batch may be short
            T = min(T, self.n_tasks - int(i) * self.tasks_per_batch)
        drawings = self.images.shape[1]
        classes = torch.stack([torch.randperm(self.n_classes, generator=g)[:c.n_way] for _ in range(T)])  # cpu: (T, N)
        picks = torch.stack([torch.randperm(drawings, generator=g)[:c.shots + c.query]  # cpu: datamodule
                             for _ in range(T * c.n_way)]).view(T, c.n_way, -1)  # (T, N, K + Q)
        char, rot = classes // self.rotations, classes % self.rotations
        x = self.images[char[..., None], picks].float() / 255.0  # (T, N, K + Q, S, S)
        for r in range(1, self.rotations):
            mask = rot == r
            x[mask] = torch.rot90(x[mask], r, dims=(-2, -1))
        x = x.unsqueeze(3)  # (T, N, K + Q, 1, S, S)
        labels = torch.arange(c.n_way).view(1, -1, 1)  # cpu: datamodule, moved by Lightning
        xs = x[:, :, :c.shots].flatten(1, 2)  # (T, N*K, 1, S, S), class-major
        xq = x[:, :, c.shots:].flatten(1, 2)  # (T, N*Q, 1, S, S)
        ys = labels.expand(T, -1, c.shots).flatten(1)  # (T, N*K)
        yq = labels.expand(T, -1, c.query).flatten(1)  # (T, N*Q)
        return xs, ys, xq, yq


class OmniglotData(EpisodeData):
    """Omniglot N-way K-shot episodes from local PNGs (1,200 training characters, rotations as classes)."""

    spec = OMNIGLOT_SPEC

    def prepare_data(self) -> None:
        try:
            find_omniglot(self.cfg.root)  # fail early, naming the paths and the layout
        except UserError as missing:  # the splits <root>/omniglot lacks, fetched as their zips (zoo/core/downloads.py)
            folder = Path(self.cfg.root) / "omniglot"
            lacking = [f"{s}.zip" for s in SPLITS if not has_split(folder, s)]
            fetch("omniglot", folder, self.cfg.download, missing, only=lacking)
            find_omniglot(self.cfg.root)

    def setup(self, stage: str | None = None) -> None:
        if getattr(self, "train_set", None) is not None:
            return
        c = self.cfg
        for name in ("n_way", "shots", "query", "meta_batch", "steps_per_epoch", "val_tasks", "test_tasks",
                     "eval_batch_tasks", "image_size"):
            if getattr(c, name) < 1:
                raise UserError(f"data.{name}={getattr(c, name)} must be at least 1")
        folder = find_omniglot(c.root)
        images, _ = load_images(folder, c.image_size)
        drawings = images.shape[1]
        if c.shots + c.query > drawings:
            raise UserError(f"data.shots + data.query = {c.shots} + {c.query} images per class, but the Omniglot "
                            f"characters in {folder} have {drawings} drawings each: lower data.query or data.shots")
        g = torch.Generator().manual_seed(c.split_seed)  # cpu: datamodule (character split)
        perm = torch.randperm(len(images), generator=g)  # cpu: datamodule
        if not 0 < c.train_characters < len(images):
            raise UserError(f"data.train_characters={c.train_characters} must be between 1 and {len(images) - 1} "
                            f"({len(images)} characters found in {folder})")
        train, held = images[perm[:c.train_characters]], images[perm[c.train_characters:]]
        rot = 4 if c.rotations else 1
        for name, part in (("training", train), ("held-out", held)):
            if c.n_way > len(part) * rot:
                raise UserError(f"data.n_way={c.n_way} is more than the {len(part) * rot} {name} classes "
                                f"({len(part)} characters x {rot} rotations) in {folder}: lower data.n_way")
        self.train_set = Episodes(train, c, c.seed, c.steps_per_epoch, c.meta_batch)
        nb = c.eval_batch_tasks
        self.val_set = Episodes(held, c, c.eval_seed, math.ceil(c.val_tasks / nb), nb, c.val_tasks)
        self.test_set = Episodes(held, c, c.eval_seed + 1, math.ceil(c.test_tasks / nb), nb, c.test_tasks)

    def info(self) -> dict:
        c = self.cfg
        return {"task": "classification", "n_way": c.n_way, "shots": c.shots,
                "image_shape": [1, c.image_size, c.image_size]}


# ---- 2-D navigation goals ---------------------------------------------------------------------
class Goals(Dataset):
    """Training item (i, epoch) -> T goals from a generator keyed by (seed, epoch, i); fixed
    evaluation sets are one item holding all their goals."""

    def __init__(self, cfg: Nav2dConfig, seed: int, n_items: int, per_item: int, keyed: bool = True):
        self.cfg, self.seed, self.n_items, self.per_item, self.keyed = cfg, seed, n_items, per_item, keyed

    def __len__(self) -> int:
        return self.n_items

    def with_tasks(self, n: int) -> Goals:
        """The same items with n goals each (to measure a step's memory on a few)."""
        return Goals(self.cfg, self.seed, self.n_items, n, self.keyed)

    def __getitem__(self, key) -> Tensor:
        i, epoch = key if isinstance(key, tuple) else (key, 0)
        if not 0 <= int(i) < self.n_items:
            raise IndexError(i)
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch * 100_019 + int(i))  # cpu: datamodule
        r = self.cfg.goal_range
        return torch.empty(self.per_item, 2).uniform_(-r, r, generator=g)  # cpu: goals (T, 2), moved by Lightning


class Nav2dData(ZooDataModule):
    """2-D point navigation tasks (MAML paper 5.3): one goal per task, uniform in [-0.5, 0.5]^2 (generated)."""

    spec = NAV2D_SPEC

    def setup(self, stage: str | None = None) -> None:
        c = self.cfg
        for name in ("meta_batch", "steps_per_epoch", "val_tasks", "test_tasks"):
            if getattr(c, name) < 1:
                raise UserError(f"data.{name}={getattr(c, name)} must be at least 1")
        self.train_set = Goals(c, c.seed, c.steps_per_epoch, c.meta_batch)
        self.val_set = Goals(c, c.eval_seed, 1, c.val_tasks)
        self.test_set = Goals(c, c.eval_seed + 1, 1, c.test_tasks)

    def info(self) -> dict:
        return {"task": "nav2d", "goal_range": self.cfg.goal_range}

    def train_dataloader(self) -> DataLoader:
        sampler = EpochSampler(len(self.train_set), self.cfg.seed, shuffle=False, tag_epoch=True)  # goals keyed by both
        return ResumableLoader(self.train_set, batch_size=None, sampler=sampler, num_workers=self.cfg.num_workers)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val_set, batch_size=None, num_workers=self.cfg.num_workers)

    def test_dataloader(self) -> DataLoader:
        return DataLoader(self.test_set, batch_size=None, num_workers=self.cfg.num_workers)
