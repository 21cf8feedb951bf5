"""SeqGAN under DDP on CPU (2 gloo processes): manual optimisation with two networks needs DDP's
unused-parameter detection (set by the model, not the user), G's gradients are all-reduced, and
every phase runs, writing one run folder and printing once."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from platform_testlib import subprocess_env  # tests/platform, on sys.path via conftest

from zoo.train import train

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["recipe=seqgan_oracle_small", "data.vocab_size=50", "data.num_val=32", "data.num_test=32",
         "model.dis_filter_sizes=[1,2]", "model.dis_num_filters=[4,4]", "model.rollouts=2",
         "model.eval_samples=64", "model.test_samples=64", "trainer.enable_progress_bar=false"]


def run_two_processes(*overrides: str) -> subprocess.CompletedProcess:
    env = subprocess_env()  # extends PYTHONPATH, never replaces it
    proc = subprocess.run([sys.executable, "-m", "zoo.train", *SMALL, "trainer.devices=2", "trainer.strategy=ddp",
                           *overrides], env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def generator_weights(run: Path) -> dict:
    ckpt = torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    return {k: v for k, v in ckpt["state_dict"].items() if k.startswith("gen.")}


@pytest.mark.slow
def test_mle_phase_on_two_processes_equals_one_with_the_same_global_batch(tmp_path):
    """MLE only, one full batch per epoch: 2 x 32 sequences (gradients all-reduced) must give the
    G of 1 x 64. Tolerance 1e-5."""
    phases = ["data.num_train=64", "model.mle_epochs=3", "model.d_pretrain_rounds=0", "model.adv_iterations=0",
              "test_after_fit=false"]
    train([*SMALL, *phases, f"run_dir={tmp_path}/one", "data.batch_size=64"])
    run_two_processes(*phases, f"run_dir={tmp_path}/two", "data.batch_size=32")
    one = generator_weights(next((tmp_path / "one").glob("*/*")))
    two = generator_weights(next((tmp_path / "two").glob("*/*")))
    assert one.keys() == two.keys() and len(one) > 0
    for key in one:
        assert torch.allclose(one[key], two[key], atol=1e-5), key


@pytest.mark.slow
def test_every_phase_runs_under_ddp(tmp_path):
    proc = run_two_processes("data.num_train=128", "data.batch_size=32", "model.mle_epochs=1",
                             "model.d_pretrain_rounds=1", "model.adv_iterations=2", "model.adv_d_rounds=1",
                             "model.adv_d_epochs=1", f"run_dir={tmp_path}")
    runs = list((tmp_path / "seqgan_oracle_small").iterdir())
    assert len(runs) == 1, "all ranks write one run folder"
    metrics = json.loads((runs[0] / "metrics.json").read_text())
    assert "test/nll_oracle_mle" in metrics, "the adversarial phase ran"
    # G's samples score above the oracle's own (the floor) and near an untrained G's (a tiny run:
    # 6.19 vs 6.10, floor 2.16, seed 0); a G broken by the all-reduce would be far off
    assert metrics["test/nll_oracle_floor"] + 1 < metrics["test/nll_oracle"] < metrics["test/nll_oracle_random"] + 0.5
    assert metrics["test/nll_oracle"] != metrics["test/nll_oracle_mle"], "the adversarial steps changed G"
    assert proc.stdout.count("run folder:") == 1, proc.stdout
