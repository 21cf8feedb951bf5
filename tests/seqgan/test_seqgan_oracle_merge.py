"""`benchmarks/seqgan_oracle.py --merge`: single-seed reports (run as separate processes) become
one over-seeds report with SeqGAN - MLE paired by seed, and only runs of one setting merge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.common import seqgan_merge as seqgan_oracle

SCHEDULE = {"mle_epochs": 40, "adv_iterations": 40}


def report(tmp_path: Path, seed: int, mle: float, seqgan: float, oracle: str, change: dict | None = None) -> str:
    run = {"seed": seed, "oracle": oracle, "schedule": SCHEDULE, "rollouts": 16, "eval_samples": 10000,
           "nll_oracle": {"MLE": mle, "SeqGAN": seqgan}}
    run.update(change or {})
    path = tmp_path / f"seed{seed}.json"
    path.write_text(json.dumps(run))
    return str(path)


def test_merge_pairs_seqgan_and_mle_by_seed_across_oracle_paths(tmp_path):
    # the same oracle file named by an absolute and by a relative path is one setting
    paths = [report(tmp_path, 2, 9.0, 8.8, "../shared/data/o.npz"),
             report(tmp_path, 0, 9.1, 8.8, "/work/shared/data/o.npz"),
             report(tmp_path, 1, 9.2, 8.8, "../shared/data/o.npz")]
    merged = seqgan_oracle.merged(paths)
    assert merged["seeds"] == [0, 1, 2]
    diff = merged["seqgan_minus_mle"]
    assert diff["diffs"] == pytest.approx([-0.3, -0.4, -0.2])
    assert diff["mean"] == pytest.approx(-0.3) and diff["se"] == pytest.approx(0.1 / 3 ** 0.5)
    assert merged["summary"]["MLE"]["mean"] == pytest.approx(9.1)


@pytest.mark.parametrize("change", [{"oracle": "../shared/data/other.npz"}, {"rollouts": 8},
                                    {"schedule": {"mle_epochs": 20, "adv_iterations": 40}}])
def test_merge_refuses_runs_of_different_settings(tmp_path, change):
    first = report(tmp_path, 0, 9.0, 8.8, "../shared/data/o.npz")
    (tmp_path / "b").mkdir()
    second = report(tmp_path / "b", 1, 9.0, 8.8, "/x/o.npz", change=change)
    with pytest.raises(SystemExit, match="differ"):
        seqgan_oracle.merged([first, second])


def test_merge_refuses_two_reports_of_one_seed(tmp_path):
    (tmp_path / "b").mkdir()
    paths = [report(tmp_path, 0, 9.0, 8.8, "o.npz"), report(tmp_path / "b", 0, 9.0, 8.7, "o.npz")]
    with pytest.raises(SystemExit, match="own seed"):
        seqgan_oracle.merged(paths)
