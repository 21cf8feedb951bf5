"""`ZooDataModule`: the LightningDataModule base, a sampler ordered by (seed, epoch), and a loader that
resumes in the middle of an epoch.

Contract:
- ``Config``: dataclass of the data options (the recipe's ``data:`` section minus ``name``); it
  extends ``zoo.data_schema.DataOptions`` (``root``, ``seed``, ``num_workers``) or ``BatchedDataOptions``
  (and ``batch_size``). The zoo's own datamodules point to their ``zoo.registry.DataSpec`` instead
  (``spec = DIGITS_SPEC``, declared in their folder's ``config.py``), which gives it.
- ``__init__(self, cfg: dict)``; read options from ``self.cfg``.
- ``info() -> dict``: primitive facts the model needs to be built (image shape, vocabulary,
  ...). Called after ``prepare_data()`` and ``setup("fit")``; stored in checkpoints.
- Missing or malformed data raises ``zoo.errors.UserError`` naming the path looked at and
  how to provide the files; a published dataset may be fetched first in ``prepare_data``
  (``zoo.core.downloads.fetch``: checksums, resume, a lock so that one process fetches).
- Train from ``shuffled_loader`` (or a ``ResumableLoader`` over an ``EpochSampler``) so a resumed
  run sees the same batches as an uninterrupted one: the order depends only on (seed, epoch), never
  on global RNG state, and the place in the epoch is saved with the checkpoint.
"""

# cpu file: samplers: index permutations for the DataLoader (tests/platform/test_device_agnostic.py)

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from zoo.core.files import atomic_path
from zoo.errors import UserError
from zoo.registry import DataSpec


class ZooDataModule(L.LightningDataModule):
    """Default loaders: a subclass whose ``setup`` fills ``train_set`` / ``val_set`` / ``test_set``
    and whose Config has ``batch_size``, ``seed`` and ``num_workers`` needs no loader methods."""

    spec: DataSpec | None = None  # the zoo's own datamodules' spec (their folder's config.py), which sets Config
    Config: type = None  # dataclass of data options
    drop_last_train: bool = False  # drop the last partial training batch

    def __init_subclass__(cls, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        spec = cls.__dict__.get("spec")
        if spec is not None:  # the class points to its spec rather than restating it
            cls.Config = spec.config

    def __init__(self, cfg: dict):
        super().__init__()
        # Lightning's own prepare_data call on global rank 0 only: a dataset fetched once for all nodes (the
        # zoo's build() calls it in every process too; a file lock in zoo/core/downloads.py makes those wait)
        self.prepare_data_per_node = False
        if self.Config is None:
            raise UserError(f"{type(self).__name__} sets no Config: a ZooDataModule names the dataclass of its "
                            "options (Config = MyDataConfig; docs/adding_a_model.md)")
        # checked when the recipe loads (zoo.config, which hands over the options object it made: taken as given)
        # or zoo.evaluate's data options (a plain dict)
        self.cfg = cfg if isinstance(cfg, self.Config) else self.Config(**cfg)
        root = getattr(self.cfg, "root", None)
        if isinstance(root, str) and Path(root).is_file():  # else "not found in <file>/mnist", as if it were a folder
            raise UserError(f"data.root={root} is a file, not a folder: point data.root at the folder that holds "
                            "the data")

    def info(self) -> dict:
        return {}

    def split(self, name: str) -> Dataset:
        """``self.<name>`` as ``setup`` left it; a subclass that fills none is told what setup() must fill."""
        if getattr(self, name, None) is None:
            self.setup("fit")
        data = getattr(self, name, None)
        if data is None:
            raise UserError(f"{type(self).__name__}.setup() left no {name}: the default loaders read train_set, "
                            "val_set and test_set, which setup() fills (docs/adding_a_model.md), or the datamodule "
                            "defines its own *_dataloader methods")
        return data

    def train_dataloader(self) -> DataLoader:
        return shuffled_loader(self.split("train_set"), self.cfg.batch_size, seed=self.cfg.seed,
                               drop_last=self.drop_last_train, num_workers=self.cfg.num_workers)

    def val_dataloader(self) -> DataLoader:
        return plain_loader(self.split("val_set"), self.cfg.batch_size, num_workers=self.cfg.num_workers)

    def test_dataloader(self) -> DataLoader:
        return plain_loader(self.split("test_set"), self.cfg.batch_size, num_workers=self.cfg.num_workers)


class EpochSampler(Sampler):
    """Indices in an order that depends only on (seed, epoch): a random permutation, or 0..n-1 with
    ``shuffle=False``; with ``tag_epoch`` each item is ``(index, epoch)``, so that a dataset can key
    its random draws by them (they then also reach DataLoader worker processes). Lightning calls
    ``set_epoch`` every epoch (and forwards it through its DDP wrapper), so a resumed run replays
    the same order. ``skip`` items are left out of the next pass only (a resume from the middle of
    an epoch, see ``ResumableLoader``)."""

    def __init__(self, n: int, seed: int = 0, shuffle: bool = True, tag_epoch: bool = False):
        self.n, self.seed, self.epoch = n, seed, 0
        self.shuffle, self.tag_epoch = shuffle, tag_epoch
        self.skip = 0  # items of this epoch already trained, left out once

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator:
        # a generator: the order is read at the first item, after Lightning's set_epoch (a DataLoader without a
        # batch sampler, MAML's meta-batches, calls this before it: a resumed run would train on epoch 0's order)
        if self.shuffle:
            g = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
            order = torch.randperm(self.n, generator=g).tolist()
        else:
            order = list(range(self.n))
        skip, self.skip = self.skip, 0
        for i in order[skip:]:
            yield (i, self.epoch) if self.tag_epoch else i

    def __len__(self) -> int:
        return self.n


class ResumableLoader(DataLoader):
    """A training DataLoader whose place in the epoch travels in the checkpoint. Lightning saves
    ``state_dict()`` of a training loader that has one and hands it back on resume; a run resumed
    from the middle of an epoch (a SIGTERM save, ``checkpoint.every_n_train_steps``) then trains
    the rest of that epoch in the order an uninterrupted run would have, instead of its first
    batches again. With an ``EpochSampler`` the batches already trained are skipped without being
    loaded; under DDP (Lightning wraps the sampler), or from an iterable dataset, they are loaded
    and dropped."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.position = 0  # batches handed out in the current pass
        self.resume_at: tuple[int, int] | None = None  # (epoch, batches) to skip in that epoch's next pass

    def state_dict(self) -> dict:
        return {"epoch": self._epoch(), "batches": self.position}

    def load_state_dict(self, state: dict) -> None:
        self.resume_at = (int(state["epoch"]), int(state["batches"]))

    def _epoch(self) -> int:
        """The epoch of the order: the sampler's, or an iterable dataset's that keys its own (skip-gram's
        chunks: its model sets it on train start too, as Lightning skips on_train_epoch_start on a resume)."""
        return getattr(self.sampler, "epoch", getattr(self.dataset, "epoch", 0))

    def __iter__(self) -> Iterator:
        self.position = 0
        if self.resume_at is None:
            return self._counted(super().__iter__())  # made now, as a DataLoader's: the same draws from torch's RNG
        return self._resumed()  # a generator: the sampler is read at the first batch, after Lightning's set_epoch

    def _counted(self, batches: Iterator) -> Iterator:
        for batch in batches:
            self.position += 1
            yield batch

    def _resumed(self) -> Iterator:
        epoch, skip = self.resume_at
        self.resume_at = None
        skip = skip if epoch == self._epoch() else 0  # an epoch-end checkpoint: the next epoch starts afresh
        direct = isinstance(self.sampler, EpochSampler)
        if direct:
            self.sampler.skip = skip * (self.batch_size or 1)
        rng = torch.get_rng_state()
        batches = super().__iter__()  # draws the workers' base seed from torch's RNG: an uninterrupted run drew it at
        if skip:  # the epoch's start, before the checkpoint's RNG state was taken, so a resumed one must not
            torch.set_rng_state(rng)
        if not direct:  # DDP: Lightning's wrapper shards the order; this rank's first batches are loaded, dropped
            for _ in range(skip):
                next(batches, None)
        self.position = skip
        yield from self._counted(batches)


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
    return ResumableLoader(dataset, batch_size=batch_size, sampler=EpochSampler(len(dataset), seed), **kwargs)


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
