"""Tiny SeqGAN set-ups shared by the tests in this folder (sizes chosen to run in seconds)."""

from __future__ import annotations

import tempfile

import lightning as L
import numpy as np

from zoo.models.seqgan.data import OracleData
from zoo.models.seqgan.module import SeqGAN
from zoo.models.seqgan.oracle import oracle_keys

TINY_DATA = {
    "root": tempfile.mkdtemp(prefix="seqgan-tests-"),  # sample cache of the tiny oracles
    "vocab_size": 30,
    "emb_dim": 8,
    "hidden_dim": 8,
    "seq_len": 8,
    "num_train": 512,
    "num_val": 128,
    "num_test": 128,
    "batch_size": 32,
    "seed": 0,
}
TINY_MODEL = {
    "gen_emb_dim": 16,
    "gen_hidden_dim": 16,
    "dis_emb_dim": 16,
    "dis_filter_sizes": [1, 2, 3, 4],
    "dis_num_filters": [16, 16, 16, 16],
    "dis_lr": 1e-3,
    "mle_epochs": 0,
    "d_pretrain_rounds": 0,
    "adv_iterations": 0,
    "adv_d_rounds": 1,
    "adv_d_epochs": 1,
    "rollouts": 4,
    "adv_batch_size": 32,
    "eval_samples": 1000,
    "test_samples": 1000,
}


def tiny_npz(
    path, V: int = 7, E: int = 3, H: int = 4, seed: int = 0, drop: str | None = None, extra: str | None = None
):
    """Write an oracle .npz in the documented format (optionally with a key dropped / added)."""
    rng = np.random.default_rng(seed)
    shapes = {"embedding": (V, E), "W_out": (H, V), "b_out": (V,)}
    for g in "ifoc":
        shapes.update({f"W_{g}": (E, H), f"U_{g}": (H, H), f"b_{g}": (H,)})
    assert sorted(shapes) == sorted(oracle_keys())
    arrays = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items() if k != drop}
    if extra:
        arrays[extra] = np.zeros(3, np.float32)
    np.savez(path, **arrays)
    return arrays


def tiny_data(**over) -> OracleData:
    dm = OracleData({**TINY_DATA, **over})
    dm.setup("fit")
    return dm


def tiny_model(dm, **over) -> SeqGAN:
    L.seed_everything(0, verbose=False)
    return SeqGAN({**TINY_MODEL, **over}, dm.info())


def fit(model, dm, max_epochs: int = -1) -> L.Trainer:
    trainer = L.Trainer(
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        max_epochs=max_epochs,
        num_sanity_val_steps=0,
    )
    trainer.fit(model, datamodule=dm)
    return trainer
