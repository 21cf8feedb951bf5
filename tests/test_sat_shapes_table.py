"""benchmarks/sat_shapes.py's comparison (benchmarks.common.sat_table): variants paired with the recipe by seed."""

from __future__ import annotations

from benchmarks.common import sat_table as sat_shapes


def record(recipe: str, bleu: dict[int, float | None], tag: str = "") -> dict:
    runs = [{"seed": s, "rc": 1 if b is None else 0,
             "metrics": {} if b is None else {"test/bleu4": b, "test/bleu1": 2 * b, "test/att_localisation": b / 100,
                                              "test/att_entropy": 1.0, "test/att_moves": 0.5, "test/att_chance": 0.12}}
            for s, b in bleu.items()]
    return {"device": "cpu", "command": f"train {recipe} {tag}", "seeds": list(bleu), "total_s": 1.0,
            "parallel": 3, "runs": runs}


def test_variants_are_paired_with_the_recipe_by_seed_and_failures_stay_in_the_table():
    records = {
        ("", "sat_shapes_hard"): record("sat_shapes_hard", {0: 60.0, 1: 70.0, 2: 50.0}),
        # listed in another seed order, seed 1 failed: paired on seeds 2 and 0 only
        ("rloo4_sum", "sat_shapes_hard"): record("sat_shapes_hard", {2: 56.0, 1: None, 0: 61.0}, "rloo4_sum"),
    }
    rows = {r["tag"]: r for r in sat_shapes.summarise(records)}
    assert set(rows) == {"", "rloo4_sum"} and "minus_recipe" not in rows[""]
    minus = rows["rloo4_sum"]["minus_recipe"]["test/bleu4"]
    assert minus["seeds"] == [2, 0] and minus["diffs"] == [6.0, 1.0]
    assert abs(minus["mean"] - 3.5) < 1e-12 and abs(minus["se"] - 2.5) < 1e-12  # sd 3.536 / sqrt(2)
    bleu = rows["rloo4_sum"]["metrics"]["test/bleu4"]
    assert bleu["n"] == 2 and bleu["failed"] == 1
    text = sat_shapes.table(list(rows.values()))
    assert "failed" in text and "+3.5 ± 2.5" in text and "(3 at once)" in text
    assert rows["rloo4_sum"]["record"] == "benchmarks/results/seeds_sat_shapes_hard_rloo4_sum_cpu.json"


def test_seed_records_are_written_into_this_checkouts_benchmarks_results():
    from pathlib import Path

    from benchmarks.common.seeds import record_path

    results = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
    assert results.is_dir()
    assert record_path("sat_shapes_hard", "rloo4_sum", "cpu") == results / "seeds_sat_shapes_hard_rloo4_sum_cpu.json"
