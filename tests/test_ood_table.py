"""benchmarks/ood_table.py's --paired-with: each mode's metrics minus an earlier result's, seed by seed."""

from __future__ import annotations

import pytest

from benchmarks import ood_table


def runs(values: dict[int, float | None]) -> list[dict]:
    return [{"seed": s, "status": "failed" if v is None else "ok", "metrics": {} if v is None else {"test/acc": v}}
            for s, v in values.items()]


def test_pairing_takes_the_seeds_both_ran_and_gives_the_mean_difference_and_its_error():
    mine = {"joint": runs({0: 0.90, 1: 0.95, 2: None, 3: 0.80})}
    earlier = {"runs": {"joint": runs({0: 0.85, 1: 0.93, 2: 0.99, 3: 0.70}), "ce": runs({0: 0.5})}}
    out = ood_table.pair(mine, earlier)
    assert set(out) == {"joint"} and out["joint"]["seeds"] == [0, 1, 3]
    acc = out["joint"]["metrics"]["test/acc"]
    assert acc["diffs"] == pytest.approx([0.05, 0.02, 0.10])
    assert acc["mean"] == pytest.approx(0.17 / 3) and acc["se"] > 0
