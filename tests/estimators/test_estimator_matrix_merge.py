"""benchmarks/estimator_matrix.py --merge: part files (this script's --out, or SeqGAN's column written in its
format) join into one JSON and table, the non-default cells counted, a column given twice refused."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def cell(value: float) -> dict:
    spread = {"values": [value], "mean": value, "sd": None, "n": 1}
    return {"spec": "x", "seeds": [0], "headline": spread, "grad_var": {**spread, "mean": 1e-3}, "step_s":
            {**spread, "mean": 0.01}, "failures": []}


def part(column: str, rows: list[str]) -> dict:
    return {"command": f"python benchmarks/estimator_matrix.py --models {column}", "models": {column: {
        "recipe": column, "headline": "test/loss", "higher_is_better": False, "cells": {r: cell(1.0) for r in rows},
        "cannot_fit": {"arm": "it handles variables of at most 2 categories"}, "same_as_default": None,
        "left_out": []}}}


def merge(tmp_path: Path, parts: list[dict]) -> subprocess.CompletedProcess:
    files = []
    for i, p in enumerate(parts):
        files.append(tmp_path / f"part{i}.json")
        files[-1].write_text(json.dumps(p))
    return subprocess.run([sys.executable, "benchmarks/estimator_matrix.py", "--merge", *map(str, files), "--out",
                           str(tmp_path / "merged.json")], cwd=ROOT, capture_output=True, text=True)


def test_parts_merge_into_one_table_with_their_cells_counted(tmp_path):
    done = merge(tmp_path, [part("dvae", ["default", "rloo", "relax"]), part("seqgan", ["default", "reinforce[ema]"])])
    assert done.returncode == 0, done.stderr
    record = json.loads((tmp_path / "merged.json").read_text())
    assert list(record["models"]) == ["dvae", "seqgan"] and len(record["parts"]) == 2
    table = (tmp_path / "merged.md").read_text()
    assert "| reinforce[ema] | — |" in table  # a row of another column, not of this one
    assert "3 non-default cells measured" in table
    assert "cannot fit: it handles variables of at most 2 categories" in table
    assert "ood_gan (no column): the OOD GAN's node z ~ N(0, I) has no parameters" in table


def test_a_column_in_two_parts_is_refused(tmp_path):
    done = merge(tmp_path, [part("dvae", ["default"]), part("dvae", ["default", "rloo"])])
    assert done.returncode != 0 and "column dvae is in two parts" in done.stderr
