"""The captioning estimator table of benchmarks/sat_shapes.py: every hard-attention variant is the recipe
`sat_shapes_hard` with one thing changed, paired with the recipe by seed; soft attention beside them."""

from __future__ import annotations

from pathlib import Path

from benchmarks.common.seeds import record_path
from zoo.spread import paired, spread

ROOT = Path(__file__).resolve().parents[2]  # the checkout (this folder is benchmarks/common/)
RLOO = "model.estimator={name: rloo, n: 4, entropy_weight: 0.002}"
VARIANTS = [  # (tag, recipe, overrides, what the row is); the first hard row is what the others are paired with
    ("", "sat_shapes_soft", [], "soft attention (recipe `sat_shapes_soft`)"),
    ("", "sat_shapes_hard", [],
     "hard, REINFORCE + moving-average baseline + entropy, caption cost / length (`score_cost: mean`, recipe)"),
    ("nosoftstart", "sat_shapes_hard", ["model.expected_context_prob=0.0"], "hard, the recipe without the soft start"),
    ("score_sum", "sat_shapes_hard", ["model.score_cost=sum"], "hard, REINFORCE, per-caption cost (`score_cost=sum`)"),
    ("reward_to_go", "sat_shapes_hard", ["model.score_cost=reward_to_go"],
     "hard, REINFORCE, each choice weighed by the words from it on (`score_cost=reward_to_go`)"),
    ("rloo4_sum", "sat_shapes_hard", [RLOO, "model.score_cost=sum"], "hard, RLOO n=4, per-caption cost"),
    ("gumbel_softmax", "sat_shapes_hard",
     ["model.estimator={name: gumbel_softmax, tau: 1.0, tau_min: 0.5, anneal_rate: 0.002}"],
     "hard, Gumbel-softmax, tau 1 -> 0.5"),
    ("straight_through", "sat_shapes_hard", ["model.estimator={name: straight_through, tau: 1.0}"],
     "hard, straight-through Gumbel, tau 1"),
]
REFERENCE = ("", "sat_shapes_hard")
COLUMNS = [("test/bleu4", "BLEU-4", 1), ("test/bleu1", "BLEU-1", 1), ("test/att_localisation", "localisation", 2),
           ("test/att_entropy", "att. entropy (nats)", 2), ("test/att_moves", "moves", 2)]
METRICS = [k for k, _, _ in COLUMNS] + ["test/att_chance"]


def by_seed(record: dict, key: str) -> dict[int, float | None]:
    return {r["seed"]: (r["metrics"].get(key) if r["rc"] == 0 else None) for r in record["runs"]}


def summarise(records: dict[tuple[str, str], dict]) -> list[dict]:
    """One row per variant: spread of every column's metric, and the variant minus the reference
    (the hard recipe) on the seeds both have, for BLEU-4 and localisation."""
    reference = records.get(REFERENCE)
    rows = []
    for tag, recipe, overrides, what in VARIANTS:
        record = records.get((tag, recipe))
        if record is None:
            continue
        row = {"variant": what, "recipe": recipe, "tag": tag, "overrides": overrides,
               "record": record_path(recipe, tag, record["device"].split(":")[0]).relative_to(ROOT).as_posix(),
               "command": record["command"], "processor": record.get("processor"),
               "seeds": record["seeds"], "total_s": record["total_s"], "parallel": record["parallel"],
               "metrics": {k: spread(list(by_seed(record, k).values())) for k in METRICS}}
        if reference is not None and (tag, recipe) != REFERENCE:
            row["minus_recipe"] = {}
            for key in ("test/bleu4", "test/att_localisation"):
                mine, theirs = by_seed(record, key), by_seed(reference, key)
                seeds = [s for s in mine if mine[s] is not None and theirs.get(s) is not None]
                if seeds:
                    row["minus_recipe"][key] = {"seeds": seeds, **paired([mine[s] for s in seeds],
                                                                         [theirs[s] for s in seeds])}
        rows.append(row)
    return rows


def cell(s: dict, digits: int) -> str:
    if s["mean"] is None:
        return "failed"
    runs = ", ".join("failed" if v is None else f"{v:.{digits}f}" for v in s["values"])
    sd = f" ± {s['sd']:.{digits}f}" if s["sd"] is not None else ""
    return f"{s['mean']:.{digits}f}{sd} ({runs})"


def difference(d: dict | None, digits: int) -> str:
    if not d:
        return ""
    se = f" ± {d['se']:.{digits}f}" if d["se"] is not None else ""
    mean = d["mean"] if round(d["mean"], digits) else 0.0  # no "-0.00"
    return f"{mean:+.{digits}f}{se}"


def table(rows: list[dict]) -> str:
    head = [name for _, name, _ in COLUMNS] + ["BLEU-4 minus recipe", "localisation minus recipe", "min, all seeds"]
    lines = ["| variant | " + " | ".join(head) + " |", "|---" * (len(head) + 1) + "|"]
    for r in rows:
        cells = [cell(r["metrics"][k], digits) for k, _, digits in COLUMNS]
        minus = r.get("minus_recipe", {})
        cells += [difference(minus.get("test/bleu4"), 1), difference(minus.get("test/att_localisation"), 2),
                  f"{r['total_s'] / 60:.0f} ({r['parallel']} at once)"]
        lines.append(f"| {r['variant']} | " + " | ".join(cells) + " |")
    chance = [r["metrics"]["test/att_chance"]["mean"] for r in rows if r["metrics"]["test/att_chance"]["mean"]]
    lines.append("\nMean ± sd over seeds (each seed's run in brackets); differences are paired by seed, "
                 "mean ± standard error. Localisation at chance: "
                 f"{min(chance):.2f}-{max(chance):.2f}; uniform attention over 64 cells has entropy 4.16 nats.")
    return "\n".join(lines)
