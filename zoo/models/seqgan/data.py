"""Data for SeqGAN's synthetic experiment: sequences sampled from the oracle LSTM.

The oracle comes from ``oracle_params`` (a ``.npz`` in the paper's format, e.g. the published
oracle) or, by default, is drawn from N(0, 1) with ``seed``. Training, validation and test
sequences are ancestral samples of it with their own seeds (cached under ``root``).
Batches are LongTensors (B, T).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from zoo.core.data import ZooDataModule, load_cache, save_cache
from zoo.errors import UserError
from zoo.models.seqgan.config import OracleDataConfig
from zoo.models.seqgan.oracle import lm_from_params, load_oracle_npz, random_oracle_params
from zoo.registry import DATAMODULES


class Sequences(Dataset):
    """A (N, T) LongTensor of token sequences; items are (T,) rows."""

    def __init__(self, seqs: torch.Tensor):
        self.seqs = seqs

    def __len__(self) -> int:
        return len(self.seqs)

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.seqs[i]


@DATAMODULES.register("seqgan_oracle")
class OracleData(ZooDataModule):
    """Sequences sampled from SeqGAN's random LSTM oracle (seeded, or loaded from a .npz)."""

    drop_last_train = True  # every training batch has batch_size sequences

    Config = OracleDataConfig

    def __init__(self, cfg: dict):
        super().__init__(cfg)
        self.oracle = None
        self.train_set = self.val_set = self.test_set = None
        self._unsaved: tuple[Path, list] | None = None  # fresh samples, cached once a loader is asked for

    def setup(self, stage: str | None = None) -> None:
        if self.oracle is not None:
            return
        c = self.cfg
        if c.oracle_params:
            params = load_oracle_npz(c.oracle_params)
        else:
            params = random_oracle_params(c.seed, c.vocab_size, c.emb_dim, c.hidden_dim)
        self.oracle = lm_from_params(params).eval().requires_grad_(False)
        cache = self._cache_path(params)
        saved = load_cache(cache) or {}
        splits = [saved[k] for k in ("train", "val", "test")] if {"train", "val", "test"} <= set(saved) else None
        if splits is None:
            splits = []
            for offset, n in ((1, c.num_train), (2, c.num_val), (3, c.num_test)):
                g = torch.Generator().manual_seed(c.seed * 1000 + offset)
                splits.append(self.oracle.sample(n, c.seq_len, generator=g))
            # written with the first loader, not here: zoo.train builds the model after setup(), and a
            # model that refuses the data (D's filters wider than seq_len) must leave nothing on disk
            self._unsaved = (cache, splits)
        self.train_set, self.val_set, self.test_set = (Sequences(x) for x in splits)

    def _save_samples(self) -> None:
        if self._unsaved is not None:
            cache, splits = self._unsaved
            save_cache(dict(zip(("train", "val", "test"), splits)), cache)
            self._unsaved = None

    def train_dataloader(self):
        self._save_samples()
        return super().train_dataloader()

    def val_dataloader(self):
        self._save_samples()
        return super().val_dataloader()

    def test_dataloader(self):
        self._save_samples()
        return super().test_dataloader()

    def _cache_path(self, params: dict) -> Path:
        """Sampling 12,000 sequences from a vocab-5,000 oracle takes seconds; the samples are cached
        under ``root``, keyed by a hash of the oracle's parameters and the sampling settings."""
        c = self.cfg
        h = hashlib.sha256(repr((c.seed, c.seq_len, c.num_train, c.num_val, c.num_test)).encode())
        for key in sorted(params):
            h.update(key.encode() + np.ascontiguousarray(params[key], dtype=np.float32).tobytes())
        return Path(c.root) / "seqgan_oracle" / f"samples-{h.hexdigest()[:20]}.pt"

    def info(self) -> dict:
        if self.oracle is None:
            raise UserError("seqgan_oracle: call setup() before info()")
        o = self.oracle
        return {
            "vocab_size": o.vocab_size,
            "seq_len": self.cfg.seq_len,
            "start_token": 0,
            "num_train": self.cfg.num_train,
            "oracle": {"vocab_size": o.vocab_size, "emb_dim": o.emb_dim, "hidden_dim": o.hidden_dim},
        }
