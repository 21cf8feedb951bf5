"""Skip-gram under DDP on CPU (2 gloo processes): ranks train disjoint chunks, equal in number even
when the corpus has an odd number of chunks (else the per-chunk synchronisation would hang), and
their summed changes learn about as well as one process (seed 0, tolerance 0.1 Spearman)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from platform_testlib import subprocess_env  # tests/platform, on sys.path via conftest

from zoo.train import train

ROOT = Path(__file__).resolve().parents[2]
# V = 330 x 4 + 20 = 1,340 words: above batch_centres / 4, so the ranks' changes are summed
CORPUS = ["recipe=skipgram_synthetic", "data.planted.groups=330", "data.planted.forms=4",
          "data.planted.tokens=300000", "data.chunk_tokens=27000", "model.dim=32", "trainer.max_epochs=2",
          "trainer.enable_progress_bar=false", "trainer.accelerator=cpu"]  # CPU DDP, also where a GPU is


@pytest.mark.slow  # costly: `make test-slow` (CI runs it)
def test_two_processes_learn_like_one(tmp_path):
    one = train([*CORPUS, f"run_dir={tmp_path}/one"]).test_metrics["test/spearman"]
    env = subprocess_env()  # extends PYTHONPATH, never replaces it
    proc = subprocess.run([sys.executable, "-m", "zoo.train", *CORPUS, f"run_dir={tmp_path}/two",
                           "trainer.devices=2", "trainer.strategy=ddp"],
                          env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = list((tmp_path / "two" / "skipgram_synthetic").iterdir())
    assert len(runs) == 1
    two = json.loads((runs[0] / "metrics.json").read_text())["test/spearman"]
    assert one > 0.5 and two > one - 0.1, (one, two)
