"""SeqGAN on the paper's oracle over seeds (benchmarks/seqgan_oracle.py): one report of several
single-seed runs, SeqGAN - MLE paired by seed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from zoo.spread import fmt, paired, spread

PAPER_RESULTS = {"random": 10.310, "mle": 9.038, "seqgan": 8.736}


def over_seeds(runs: list[dict], schedule: dict) -> dict:
    """One report for several seeds: every run, each method's spread, SeqGAN - MLE paired by seed."""
    finals = {m: [r["nll_oracle"][m] for r in runs] for m in runs[0]["nll_oracle"]}
    diff = paired(finals["SeqGAN"], finals["MLE"])
    seeds = [r["seed"] for r in runs]
    print(f"\nover seeds {seeds}: " + "; ".join(f"{m} {fmt(spread(v), 3)}" for m, v in finals.items()))
    print(f"SeqGAN - MLE, paired by seed: {diff['mean']:+.3f} (s.e. {diff['se']:.3f}); "
          "paper 8.736 - 9.038 = -0.302")
    return {"seeds": seeds, "command": "python " + " ".join(sys.argv), "schedule": schedule,
            "summary": {m: spread(v) for m, v in finals.items()}, "seqgan_minus_mle": diff,
            "paper_nll_oracle": PAPER_RESULTS, "runs": runs}


def merged(paths: list[str]) -> dict:
    """The over-seeds report of single-seed reports written apart (same schedule and oracle)."""
    runs = [json.loads(Path(path).read_text()) for path in paths]

    def setting(run: dict, key: str) -> str:  # the oracle file by name: runs may give it by other paths
        value = run.get(key)
        return Path(value).name if key == "oracle" and str(value).endswith(".npz") else json.dumps(value)

    for key in ("schedule", "oracle", "rollouts", "eval_samples"):
        if len({setting(r, key) for r in runs}) > 1:
            raise SystemExit(f"--merge: the reports differ in {key!r}; only runs of one setting merge")
    if any("seed" not in r for r in runs) or len({r["seed"] for r in runs}) < len(runs):
        raise SystemExit("--merge: every report must be a single-seed run with its own seed")
    return over_seeds(sorted(runs, key=lambda r: r["seed"]), runs[0]["schedule"])
