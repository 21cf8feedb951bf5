"""benchmarks/estimator_matrix.py without training: the step-size search and the order of the runs, the paired
verdict (a claim only beyond 2 standard errors with the same sign on most seeds), a column's part file, table and
figure from run records, the published record (old short columns kept apart, marked), and the docs' guide equal
to the one generated from the published JSON (every number in it comes from there)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import estimator_matrix as em  # noqa: E402

DVAE_ROWS = ["default", "gumbel_softmax", "reinforce", "relax", "rloo", "straight_through"]


def write_record(folder: Path, row: str, k: int, seed: int, test: float, val: float | None = None,
                 failure: dict | None = None) -> None:
    """A run record as --run writes it (the fields collect reads)."""
    folder.mkdir(parents=True, exist_ok=True)
    val = test if val is None else val
    curve = [{"step": 100 * i, "train_s": 2.0 * i, "wall_s": 2.5 * i, "value": val + 3 - i} for i in range(1, 4)]
    rec = {"column": "dvae", "row": row, "spec": row, "settings": [], "lr": em.lr_at(1e-3, k), "lr_step": k,
           "seed": seed, "test": test, "val_last": curve[-1]["value"], "curve": curve, "grad_var": 1e-3 * (1 + k),
           "train_s": 6.0, "wall_s": 30.0, "failure": failure, "extra": []}
    (folder / f"{em.slug(row, k, seed)}.json").write_text(json.dumps(rec))


def complete_dvae(records: Path, offsets: dict[str, list[float]]) -> None:
    """Every run of the dvae column: the default at 20 + seed, each row at the default + its offset per seed,
    best (lowest validation) at lr step -1."""
    folder = records / "dvae"
    for s in range(3):
        write_record(folder, "default", 0, s, 20.0 + s)
    for row in DVAE_ROWS[1:]:
        off = offsets.get(row, [0.0, 0.0, 0.0])
        for k, extra in ((0, 1.0), (1, 2.0), (-2, 0.5)):
            write_record(folder, row, k, 0, 20.0 + off[0] + extra)
        for s in range(3):
            write_record(folder, row, -1, s, 20.0 + s + off[s])
        for s in (1, 2):
            write_record(folder, row, 0, s, 21.0 + s + off[s])


def test_claim_needs_two_standard_errors_and_the_direction_of_better():
    assert em.claim([0.5, 0.6, 0.4], higher=False) == "worse"
    assert em.claim([0.5, 0.6, 0.4], higher=True) == "better"
    assert em.claim([-0.5, -0.6, -0.4], higher=False) == "better"
    assert em.claim([0.5, -0.6, 0.4], higher=False) == "ties"  # within 2 standard errors
    assert em.claim([0.5, None], higher=False) == "too few seeds"  # one seed: no standard error
    # 2 standard errors exceeded, but the sign of the mean on 2 seeds of 5 only
    assert em.claim([10.0, 10.0, -0.1, -0.1, -0.1], higher=False) == "ties"


def test_step_sizes_go_one_step_further_from_an_edge_then_seeds_at_the_recipe_rate_and_the_pick(tmp_path):
    folder = tmp_path / "dvae"
    for s in range(3):
        write_record(folder, "default", 0, s, 20.0)
    recs = em.records_of(folder)
    assert em.plan("dvae", recs, ["default", "rloo"]) == [("rloo", 0, 0), ("rloo", -1, 0), ("rloo", 1, 0)]
    write_record(folder, "rloo", 0, 0, 22.0)
    write_record(folder, "rloo", -1, 0, 23.0)
    write_record(folder, "rloo", 1, 0, 21.0)  # the best, at the edge: x9 next
    recs = em.records_of(folder)
    assert em.lr_pick(recs, "rloo", higher=False) == (None, [2])
    assert em.plan("dvae", recs, ["default", "rloo"]) == [("rloo", 2, 0)]
    write_record(folder, "rloo", 2, 0, 0.0, failure={"rc": 1, "error": "nan"})  # a failed run scores worst
    recs = em.records_of(folder)
    assert em.lr_pick(recs, "rloo", higher=False) == (1, [])
    assert em.plan("dvae", recs, ["default", "rloo"]) == [("rloo", 0, 1), ("rloo", 0, 2), ("rloo", 1, 1),
                                                          ("rloo", 1, 2)]


def test_a_borderline_difference_gets_two_more_seeds_paired_by_seed(tmp_path):
    folder = tmp_path / "dvae"
    for s in range(3):
        write_record(folder, "default", 0, s, 20.0 + s)
    for k, val in ((0, 21.0), (-1, 25.0), (1, 26.0)):
        write_record(folder, "rloo", k, 0, val)
    # row - default by seed: +1.0, +1.5, +0.2: mean 0.9, se 0.38: 2.4 standard errors, borderline
    write_record(folder, "rloo", 0, 1, 22.5)
    write_record(folder, "rloo", 0, 2, 22.2)
    recs = em.records_of(folder)
    assert em.lr_pick(recs, "rloo", higher=False) == (0, [])
    assert em.plan("dvae", recs, ["default", "rloo"]) == [("default", 0, 3), ("default", 0, 4), ("rloo", 0, 3),
                                                          ("rloo", 0, 4)]
    for s, (d, r) in zip((3, 4), ((30.0, 31.0), (40.0, 41.0))):
        write_record(folder, "default", 0, s, d)
        write_record(folder, "rloo", 0, s, r)
    recs = em.records_of(folder)
    assert em.plan("dvae", recs, ["default", "rloo"]) == []
    base = em.cell(recs, "default", 0, em.SEEDS, None, False, None)
    c = em.cell(recs, "rloo", 0, em.SEEDS, base, False, None)
    assert c["seeds"] == [0, 1, 2, 3, 4]
    assert c["vs_default"]["diffs"] == pytest.approx([1.0, 1.5, 0.2, 1.0, 1.0])
    assert c["verdict"] == "worse"  # 0.94 +- 0.21: now beyond 2 standard errors, same sign on every seed
    # a clear difference (6 standard errors) is decided on 3 seeds
    assert not em.borderline({**recs, ("rloo", 0, 2): {**recs[("rloo", 0, 2)], "test": 22.9}}, "rloo", 0, em.SEEDS)


def test_a_failed_run_loses_the_pick_even_with_a_better_number():
    recs = {("r", 0, 0): {"val_last": 5.0}, ("r", -1, 0): {"val_last": None}, ("r", 1, 0): {"val_last": 6.0}}
    assert em.lr_pick(recs, "r", higher=False) == (0, [])
    assert em.score({"val_last": float("nan")}, higher=True) == float("-inf")


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """A complete synthetic dvae column collected and published beside the 2026-11-29 record."""
    tmp = tmp_path_factory.mktemp("matrix")
    records = tmp / "records"
    complete_dvae(records, {"rloo": [0.5, 0.6, 0.4], "relax": [0.5, -0.6, 0.4]})
    with pytest.MonkeyPatch.context() as mp:  # the capability check's answer for the discrete VAE, given here:
        # the test imports neither the model nor the estimators
        fits = {row: {"spec": row, "settings": []} for row in DVAE_ROWS}
        mp.setattr(em, "rows_for", lambda column: (fits, {"arm": "it handles variables of at most 2 categories"},
                                                   None))
        part = em.collect("dvae", records, figures=tmp / "figures")
    out = tmp / "estimator_matrix.json"
    docs = tmp / "estimators.md"
    docs.write_text(f"intro\n{em.GUIDE_START}\nold guide\n{em.GUIDE_END}\nrest\n")
    record = em.publish(records, out, docs)
    return {"tmp": tmp, "part": part, "record": record, "docs": docs.read_text()}


def test_a_column_from_its_records(published):
    part = published["part"]
    assert part["complete"] and part["runs_left"] == 0
    rloo = part["cells"]["rloo"]
    assert rloo["picked_lr_step"] == -1 and rloo["best_lr"]["lr"] == pytest.approx(1e-3 / 3, rel=1e-3)
    assert rloo["best_lr"]["vs_default"]["diffs"] == pytest.approx([0.5, 0.6, 0.4])
    assert rloo["best_lr"]["verdict"] == "worse" and part["cells"]["relax"]["best_lr"]["verdict"] == "ties"
    assert rloo["recipe_lr"]["test"]["values"] == [21.5, 22.6, 23.4]  # seed 0 of the search, seeds 1, 2
    assert set(rloo["lr_search"]) == {"0.001", "0.003", "0.0001111", "0.0003333"}
    assert part["budget_s"] == 6.0 and rloo["best_lr"]["at_budget"]["values"] == [20.5, 21.6, 22.4]
    assert part["spread"]["record"] == "seeds_dvae_digits_cpu.json"
    table = (published["tmp"] / "records" / "dvae.md").read_text()
    assert "21.000 ± 1.000 (20.000 / 21.000 / 22.000)" in table  # the default's per-seed values
    assert "Δ +0.500 ± 0.058, worse" in table and "Δ +0.100 ± 0.351, ties" in table
    assert (published["tmp"] / "figures" / "matrix_dvae.png").stat().st_size > 10_000


def test_published_has_the_complete_columns_and_the_guide_claims_only_what_holds(published):
    record, docs = published["record"], published["docs"]
    assert list(record["columns"]) == ["dvae"] and record["in_progress"] == {}
    md = (published["tmp"] / "estimator_matrix.md").read_text()
    assert "### dvae: dvae_digits at its own length" in md and "### seqgan" not in md
    assert "old guide" not in docs and docs.startswith("intro\n") and docs.endswith("rest\n")
    assert "Worse: `rloo` (lr 0.0003333: Δ +0.500 ± 0.058, seeds +0.500 / +0.600 / +0.400" in docs
    assert "Ties: " in docs and "`relax` (lr 0.0003333: Δ +0.100 ± 0.351" in docs
    assert "Better than the default" not in docs
    assert "![estimator matrix, column dvae: validation curves](estimators/matrix_dvae.png)" in docs
    assert "column seqgan: validation curves" not in docs  # a column not published shows no curves
    assert "**Token sequences** (SeqGAN's generator, column `seqgan`): being re-measured" in docs


def test_the_docs_guide_is_the_one_generated_from_the_published_json():
    """Every number of docs/estimators.md's guide comes from benchmarks/results/estimator_matrix.json."""
    text = em.DOCS.read_text()
    start, end = text.index(em.GUIDE_START) + len(em.GUIDE_START), text.index(em.GUIDE_END)
    record = json.loads(em.OUT.read_text())
    assert text[start:end].strip() == em.guide(record).strip(), (
        "docs/estimators.md's guide differs from the JSON's: python benchmarks/estimator_matrix.py --publish")


def test_a_column_part_way_says_which_seeds_are_not_run_and_is_not_published(tmp_path, monkeypatch):
    folder = tmp_path / "records" / "dvae"
    for s in range(3):
        write_record(folder, "default", 0, s, 20.0 + s)
    for k in (0, -1, 1):
        write_record(folder, "rloo", k, 0, 21.0 + k * k)
    monkeypatch.setattr(em, "rows_for", lambda column: ({r: {"spec": r, "settings": []} for r in ("default", "rloo")},
                                                        {}, None))
    part = em.collect("dvae", tmp_path / "records", figures=tmp_path)
    assert not part["complete"] and part["runs_left"] == 2  # seeds 1 and 2 at the pick (the recipe's rate)
    assert part["cells"]["rloo"]["recipe_lr"]["verdict"] == "too few seeds"
    assert "21.000 (21.000 / not run / not run)" in (tmp_path / "records" / "dvae.md").read_text()
    out = tmp_path / "estimator_matrix.json"
    shutil.copy(em.OUT, out)
    docs = tmp_path / "estimators.md"
    docs.write_text(f"{em.GUIDE_START}\n{em.GUIDE_END}\n")
    record = em.publish(tmp_path / "records", out, docs)
    assert record["columns"] == {} and record["in_progress"]["dvae"]["runs"] == 6
    assert "column `dvae`): being re-measured at the recipe's length (6 runs recorded so far)" in docs.read_text()


def test_budgets_count_cpu_seconds_where_every_run_has_them_else_wall_seconds(tmp_path):
    """A column's budget and its 'within the budget' values use the training thread's CPU seconds (CurveTimer
    records them beside wall seconds) only when every run has them: one clock a column."""
    complete_dvae(tmp_path, {})
    published = em.FIGURES / "matrix_dvae.png"
    before = published.stat().st_mtime_ns
    part = em.collect("dvae", records=tmp_path)
    assert part["clock"] == "train_s" and part["budget_s"] == 6.0
    # a scratch folder's curves lie beside its records; the published figure is not touched
    assert (tmp_path / "matrix_dvae.png").stat().st_size > 10_000 and published.stat().st_mtime_ns == before
    for path in (tmp_path / "dvae").glob("*.json"):  # the same runs with CPU seconds, 4x fewer than wall's
        rec = json.loads(path.read_text())
        rec["train_cpu_s"] = rec["train_s"] / 4
        rec["curve"] = [{**p, "train_cpu_s": p["train_s"] / 4} for p in rec["curve"]]
        path.write_text(json.dumps(rec))
    part = em.collect("dvae", records=tmp_path)
    assert part["clock"] == "train_cpu_s" and part["budget_s"] == 1.5
    default = part["cells"]["default"]["recipe_lr"]
    assert default["train_s"]["values"] == [1.5, 1.5, 1.5]
    assert default["at_budget"]["values"] == [20.0, 21.0, 22.0]  # the last validation inside, at 1.5 CPU s
    (tmp_path / "dvae" / f"{em.slug('rloo', 0, 1)}.json").write_text(json.dumps(
        {**json.loads((tmp_path / "dvae" / f"{em.slug('rloo', 0, 1)}.json").read_text()), "train_cpu_s": None}))
    assert em.collect("dvae", records=tmp_path)["clock"] == "train_s"  # one run without: wall seconds


def test_the_curve_timer_counts_cpu_seconds_of_the_training_thread():
    import time

    from matrix_timer import CurveTimer

    timer = CurveTimer()
    timer.on_train_batch_start(None, None, None, 0)
    c = time.thread_time()
    while time.thread_time() - c < 0.05:  # busy until the thread has had 0.05 s of CPU, however loaded the machine
        pass
    time.sleep(0.1)  # idle: wall time only
    timer.on_train_batch_end(None, None, None, None, 0)
    assert timer.train_cpu_s >= 0.05 and timer.train_s - timer.train_cpu_s >= 0.09


def test_a_column_with_a_start_says_where_its_estimator_phase_begins(tmp_path, monkeypatch):
    """SeqGAN's rows share their MLE-pretrained G at a seed: the caveat gives it and what the default moves it by,
    and says 'per seed' where the rows' starts differ."""
    folder = tmp_path / "dvae"
    for s in range(3):
        write_record(folder, "default", 0, s, 20.0 + s)
        write_record(folder, "rloo", 0, s, 21.0 + s)
    monkeypatch.setitem(em.COLUMNS, "dvae", {**em.COLUMNS["dvae"], "start": ("test/start", "the pretrained model's")})
    for path in folder.glob("*.json"):
        rec = json.loads(path.read_text())
        rec["test_metrics"] = {"test/start": 20.5 + rec["seed"]}
        path.write_text(json.dumps(rec))
    text = em.start_caveat("dvae", em.records_of(folder))
    assert "the same for every row at a seed: 21.500" in text and "moves it by -0.500" in text
    rec = json.loads((folder / f"{em.slug('rloo', 0, 1)}.json").read_text())
    rec["test_metrics"]["test/start"] = 30.0
    (folder / f"{em.slug('rloo', 0, 1)}.json").write_text(json.dumps(rec))
    text = em.start_caveat("dvae", em.records_of(folder))  # seed 1's start is ambiguous: seeds 0 and 2 only
    assert "(per seed: 21.500" in text and "moves it by -0.500" in text
    assert em.start_caveat("vae", em.records_of(folder)) == ""
