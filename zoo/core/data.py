"""`ZooDataModule`: the LightningDataModule base, and a resumable shuffling sampler.

Contract:
- ``Config``: dataclass of the data options (the recipe's ``data:`` section minus ``name``);
  by convention it has ``root`` (default "data"), ``batch_size`` and ``num_workers``.
- ``__init__(self, cfg: dict)``; read options from ``self.cfg``.
- ``info() -> dict``: primitive facts the model needs to be built (image shape, vocabulary,
  ...). Called after ``prepare_data()`` and ``setup("fit")``; stored in checkpoints.
- Missing or malformed data raises ``zoo.errors.UserError`` naming the path looked at and
  how to provide the files.
- Shuffle with ``EpochSampler`` (or ``shuffled_loader``) so a resumed run sees the same batches
  as an uninterrupted one: the order depends only on (seed, epoch), never on global RNG state.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from zoo.core.files import atomic_path
from zoo.errors import UserError


class ZooDataModule(L.LightningDataModule):
    """Default loaders: a subclass whose ``setup`` fills ``train_set`` / ``val_set`` / ``test_set``
    and whose Config has ``batch_size``, ``seed`` and ``num_workers`` needs no loader methods."""

    Config: type = None  # dataclass of data options; subclasses set it
    drop_last_train: bool = False  # drop the last partial training batch

    def __init__(self, cfg: dict):
        super().__init__()
        self.cfg = self.Config(**cfg)
        root = getattr(self.cfg, "root", None)
        if isinstance(root, str) and Path(root).is_file():  # else "not found in <file>/mnist", as if it were a folder
            raise UserError(f"data.root={root} is a file, not a folder: point data.root at the folder that holds "
                            "the data")

    def info(self) -> dict:
        return {}

    def train_dataloader(self) -> DataLoader:
        return shuffled_loader(self.train_set, self.cfg.batch_size, seed=self.cfg.seed,
                               drop_last=self.drop_last_train, num_workers=self.cfg.num_workers)

    def val_dataloader(self) -> DataLoader:
        return plain_loader(self.val_set, self.cfg.batch_size, num_workers=self.cfg.num_workers)

    def test_dataloader(self) -> DataLoader:
        return plain_loader(self.test_set, self.cfg.batch_size, num_workers=self.cfg.num_workers)


class EpochSampler(Sampler[int]):
    """Random permutation from (seed, epoch). Lightning calls ``set_epoch`` every epoch (and wraps
    it for DDP), so a run resumed from an epoch-end checkpoint replays the same order."""

    def __init__(self, n: int, seed: int = 0):
        self.n, self.seed, self.epoch = n, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        g = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
        return iter(torch.randperm(self.n, generator=g).tolist())

    def __len__(self) -> int:
        return self.n


def check_full_batch(n_examples: int, batch_size: int) -> None:
    """A training loader that drops its last partial batch needs one full batch: without, Lightning
    "trains" on no batch and the run exits 0 having learnt nothing."""
    if batch_size > n_examples:
        raise UserError(f"data.batch_size={batch_size} is larger than the {n_examples} training examples, "
                        "and the last partial batch is dropped: an epoch would have no batch. "
                        f"Choose data.batch_size <= {n_examples}")


def shuffled_loader(dataset: Dataset, batch_size: int, seed: int = 0, **kwargs: Any) -> DataLoader:
    if kwargs.get("drop_last"):
        check_full_batch(len(dataset), batch_size)
    return DataLoader(dataset, batch_size=batch_size, sampler=EpochSampler(len(dataset), seed), **kwargs)


def plain_loader(dataset: Dataset, batch_size: int, **kwargs: Any) -> DataLoader:
    return DataLoader(dataset, batch_size=batch_size, shuffle=False, **kwargs)


def load_cache(path: Path) -> dict | None:
    """A cache of tensors that ``save_cache`` wrote, or None when it is absent, unreadable, cut short
    or from another version (the data is then made again)."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception:
        return None


def save_cache(obj: dict, path: Path) -> None:
    """Write ``obj`` to ``path`` atomically (a kill leaves the old file or none, never half of one); a
    folder that cannot be written in, or a full disk, only costs making the data again next run."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp:
            torch.save(obj, tmp)
    except (OSError, RuntimeError):  # torch's writer says RuntimeError for a file it may not open
        pass
