"""benchmarks/estimator_matrix.py --run started once per core: each run is trained by one runner only (a run another
runner holds is passed by; a claim file left by a killed runner is free), a runner with nothing free waits for a run
in flight instead of stopping, and the runner that writes a column's last record collects it. Runs are faked: the
plan is three seeds of the default, a run writes its record."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import estimator_matrix as em  # noqa: E402

pytest.importorskip("fcntl")  # the runners' holds are POSIX file locks

CELLS = [("default", 0, 0), ("default", 0, 1), ("default", 0, 2)]


def write_record(folder: Path, row: str, k: int, seed: int) -> None:
    """The fields records_of reads."""
    (folder / f"{em.slug(row, k, seed)}.json").write_text(json.dumps({"row": row, "lr_step": k, "seed": seed}))


@pytest.fixture
def fake_runs(monkeypatch):
    """(runs trained by this process, columns it collected), with a plan of CELLS and runs that write records."""
    trained, collected = [], []

    def run_one(column, row, spec_settings, k, seed, runs, extra, folder, device):
        trained.append((row, k, seed))
        write_record(folder, row, k, seed)
        return {"headline": "test/x", "test": 1.0, "val_last": 1.0, "failure": None}

    monkeypatch.setattr(em, "rows_for", lambda column: ({"default": {}}, {}, None))
    monkeypatch.setattr(em, "plan", lambda column, recs, rows, seeds: [c for c in CELLS if c not in recs])
    monkeypatch.setattr(em, "run_one", run_one)
    monkeypatch.setattr(em, "collect_column", lambda column, records: collected.append(column))
    return trained, collected


def test_a_held_run_is_passed_by_and_a_claim_left_by_a_killed_runner_is_free(tmp_path):
    folder = tmp_path / "dvae"
    held = em.hold(folder, "a")
    assert held is not None
    assert em.hold(folder, "a") is None  # a second open file: another runner
    assert em.in_flight(folder) == ["a"]
    em.release(folder, "a", held)
    assert not (folder / "a.claim").exists() and em.in_flight(folder) == []
    (folder / "b.claim").write_text("")  # its runner was killed: nobody holds the lock
    assert em.in_flight(folder) == []
    again = em.hold(folder, "b")
    assert again is not None
    em.release(folder, "b", again)
    (folder / "c.json").write_text("{}")
    assert em.hold(folder, "c") is None  # its record is written: nothing left to hold


def test_one_runner_trains_every_run_and_collects(tmp_path, fake_runs):
    trained, collected = fake_runs
    em.run_columns(["dvae"], tmp_path, tmp_path / "runs", [], None, (0, 1, 2))
    assert trained == CELLS
    assert collected == ["dvae"]


def test_a_runner_passes_by_the_run_in_flight_and_waits_for_it_before_stopping(tmp_path, fake_runs, monkeypatch):
    trained, collected = fake_runs
    folder, first = tmp_path / "dvae", em.slug(*CELLS[0])
    other = em.hold(folder, first)  # the other runner's run
    waits, real_wait = threading.Event(), em.wait_for

    def wait_for(claim):
        waits.set()
        real_wait(claim)
        assert claim == folder / f"{first}.claim"

    def other_runner():  # finishes its run once this runner waits for it
        waits.wait()
        write_record(folder, *CELLS[0])
        em.release(folder, first, other)

    monkeypatch.setattr(em, "wait_for", wait_for)
    thread = threading.Thread(target=other_runner)
    thread.start()
    try:
        em.run_columns(["dvae"], tmp_path, tmp_path / "runs", [], None, (0, 1, 2))
        waited = waits.is_set()
    finally:
        waits.set()  # a runner that stopped without waiting leaves the thread nothing to wait for
        thread.join()
    assert waited  # it did not stop while a run was in flight
    assert trained == CELLS[1:]  # never the held run
    assert collected == []  # the other runner wrote the last record: that one collects
