"""One command, two processes, the same weights bit for bit (CPU, trainer.deterministic=true, threads=1).

What may differ between the two processes, and must not matter: Python's hash randomisation
(PYTHONHASHSEED: the order of sets of strings, e.g. a vocabulary), the working directory, a data
cache that the first run builds and the second reads, and DataLoader workers (data.num_workers).
Each test runs the tiny command in two subprocesses (`python -m zoo.train`) and compares the final
last.ckpt state dicts byte for byte and the test metrics. ~45 s on 2 cores.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from platform_testlib import subprocess_env

COMMON = ["trainer.deterministic=true", "threads=1", "seed=0", "trainer.enable_progress_bar=false",
          "trainer.enable_model_summary=false"]
VAE = ["recipe=vae_digits", "trainer.max_epochs=1"]
SEQGAN_TEXT = ["recipe=seqgan_text", "model.mle_epochs=1", "model.d_pretrain_rounds=1", "model.adv_iterations=1",
               "model.rollouts=2", "data.num_generated=400", "model.bleu_samples=10", "model.test_bleu_samples=10",
               "model.bleu_refs=20"]
# ~5 chunks of 6,000 words: with 2 workers each must take its share, not every chunk
SKIPGRAM = ["recipe=skipgram_synthetic", "trainer.max_epochs=1", "data.planted.tokens=30000",
            "data.planted.pairs_per_kind=50", "data.chunk_tokens=6000"]


def run(tmp: Path, name: str, args: list[str], hash_seed: int, cwd: str) -> tuple[dict, dict]:
    """``python -m zoo.train ARGS`` from ``tmp/<cwd>`` with PYTHONHASHSEED=hash_seed: (state dict, test metrics)."""
    where = tmp / cwd
    where.mkdir(parents=True, exist_ok=True)
    run_dir = tmp / "runs" / name
    env = {**subprocess_env(), "PYTHONHASHSEED": str(hash_seed)}
    proc = subprocess.run([sys.executable, "-m", "zoo.train", *args, *COMMON, f"run_dir={run_dir}"],
                          cwd=where, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    (ckpt,) = run_dir.glob("*/*/checkpoints/last.ckpt")
    state = torch.load(ckpt, map_location="cpu", weights_only=True)["state_dict"]
    return state, json.loads((ckpt.parent.parent / "metrics.json").read_text())


def raw(t: torch.Tensor) -> bytes:
    return t.detach().reshape(-1).contiguous().view(torch.uint8).numpy().tobytes()


def assert_same(first: tuple[dict, dict], second: tuple[dict, dict]) -> None:
    (a, metrics_a), (b, metrics_b) = first, second
    assert list(a) == list(b)
    differ = [k for k in a if a[k].dtype != b[k].dtype or a[k].shape != b[k].shape or raw(a[k]) != raw(b[k])]
    assert not differ, f"final weights differ between the two processes: {differ}"
    # as JSON text, so that a NaN metric (an empty evaluation set) equals itself
    assert json.dumps(metrics_a, sort_keys=True) == json.dumps(metrics_b, sort_keys=True)


@pytest.mark.slow  # costly: `make test-slow` (CI runs it)
def test_vae_digits_same_across_hash_seed_cwd_and_workers(tmp_path):
    first = run(tmp_path, "a", VAE, hash_seed=1, cwd="cwd_a")
    second = run(tmp_path, "b", [*VAE, "data.num_workers=2"], hash_seed=2, cwd="cwd_b")
    assert_same(first, second)


@pytest.mark.slow  # costly: `make test-slow` (CI runs it)
def test_seqgan_text_vocabulary_and_weights_same_across_hash_seed_and_cwd(tmp_path):
    first = run(tmp_path, "a", SEQGAN_TEXT, hash_seed=1, cwd="cwd_a")
    second = run(tmp_path, "b", SEQGAN_TEXT, hash_seed=2, cwd="cwd_b")
    assert_same(first, second)


@pytest.fixture(scope="module")
def skipgram_first(tmp_path_factory) -> tuple[Path, tuple[dict, dict]]:
    """The skip-gram run that generates the corpus and builds its cache (later runs read them)."""
    tmp = tmp_path_factory.mktemp("skipgram")
    args = [*SKIPGRAM, f"data.root={tmp / 'data'}"]
    return tmp, run(tmp, "fresh", args, hash_seed=1, cwd="cwd_a")


@pytest.mark.slow
def test_skipgram_same_across_hash_seed_cwd_and_cache_state(skipgram_first):
    tmp, first = skipgram_first
    assert (tmp / "data" / "skipgram_cache").is_dir()
    assert_same(first, run(tmp, "cached", [*SKIPGRAM, f"data.root={tmp / 'data'}"], hash_seed=2, cwd="cwd_b"))


@pytest.mark.slow
def test_skipgram_data_loader_workers_share_the_chunks(skipgram_first):
    """With data.num_workers=2 each worker takes every other chunk, interleaved back in order (were
    every worker to read every chunk, training would see each twice and the run would differ). This
    run generates the corpus and counts the vocabulary itself, under another hash seed."""
    tmp, first = skipgram_first
    args = [*SKIPGRAM, f"data.root={tmp / 'data_workers'}", "data.num_workers=2"]
    assert_same(first, run(tmp, "workers", args, hash_seed=3, cwd="cwd_b"))
