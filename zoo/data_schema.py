"""The options every datamodule shares, said once: each datamodule's options dataclass (in
``zoo/models/<name>/config.py``) extends ``DataOptions``, or ``BatchedDataOptions`` when its loaders
serve batches of examples. No torch here: a recipe's keys are checked before torch is imported.

A subclass overrides a field only where its default differs (``KarpathyConfig.num_workers = 2``); what
its ``seed`` seeds and where it looks under ``root`` are said in its docstring."""

from __future__ import annotations

from dataclasses import dataclass

from zoo.schema import nonempty_path, positive


@dataclass
class DataOptions:
    """``data.root``, ``data.seed`` and ``data.num_workers`` of every recipe."""

    # Every recipe takes data.root, so that a sweep or a script can set it for any dataset: a datamodule
    # whose data are generated in memory accepts it and reads nothing there
    root: str = nonempty_path("data")  # data folder (a relative path is taken from the working folder)
    seed: int = 0  # seeds the data's randomness: generation, splits, shuffling (the docstring says which)
    num_workers: int = 0  # DataLoader worker processes (0: data are loaded in the training process)


@dataclass
class BatchedDataOptions(DataOptions):
    """A datamodule whose loaders serve batches of examples (MAML's tasks and skip-gram's chunks of text
    are batched by their own options, and take no ``batch_size``)."""

    batch_size: int = positive(64)  # examples per training batch (and per validation / test batch where
    # the datamodule has no eval_batch_size)
