"""Hard attention's gradient estimators over seeds, beside soft attention, on the shapes scenes.

    python benchmarks/sat_shapes.py                          # train what is not on record, then the table
    python benchmarks/sat_shapes.py --only rloo4_sum --rerun # train one variant again
    python benchmarks/sat_shapes.py --table-only             # the table from the records alone

Every hard variant is the recipe `sat_shapes_hard` (the frozen encoder of sat-shapes-soft, the soft
start, 20 epochs, Adam 1e-3) with its estimator or cost changed by overrides, so the rows differ in
one thing. Each variant is trained with seeds 0-2 by `recipe_seeds.train_seeds` (its own process
per run, one torch thread, `--parallel` at once, scored like the cards: greedy captions on the 500
test scenes) into its own record, benchmarks/results/seeds_<recipe>[_<tag>]_<device>.json; a
variant whose record exists is read, not trained again (`--rerun` trains it anyway). Writes
benchmarks/results/sat_shapes_<device>.json (the records' names and commands, mean / sd / every run
per metric, and each variant minus the recipe paired by seed) and sat_shapes_<device>.md (the table
in docs/captioning.md). The one-seed table of the 6-epoch recipes from pixels that this replaced is
sat_shapes_6epochs_seed0.json.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from devices import add_device_option, processor, resolve_device
from recipe_seeds import record_path, train_seeds
from spread import paired, spread

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
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


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    add_device_option(ap)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--parallel", type=int, default=3, help="runs at once (each uses one torch thread)")
    ap.add_argument("--only", default="", help="comma-separated tags to train (recipe rows: the recipe's name)")
    ap.add_argument("--rerun", action="store_true", help="train the chosen variants even when on record")
    ap.add_argument("--table-only", action="store_true", help="train nothing: the table from the records")
    ap.add_argument("--runs", default="runs/bench_sat_shapes", help="run folders go here")
    args = ap.parse_args()
    device = resolve_device(args.device)
    seeds = [int(s) for s in args.seeds.split(",")]
    only = set(filter(None, args.only.split(",")))
    records = {}
    for tag, recipe, overrides, what in VARIANTS:
        path = record_path(recipe, tag, device.type)
        chosen = not only or (tag or recipe) in only
        if chosen and not args.table_only and (args.rerun or not path.exists()):
            command = ["python", "benchmarks/recipe_seeds.py", "--recipes", recipe, "--seeds", args.seeds,
                       "--parallel", str(args.parallel), "--device", args.device, "--runs", args.runs]
            command += ["--extra", *overrides, "--tag", tag] if tag else []
            print(f"{what}: training seeds {seeds}", flush=True)
            train_seeds(recipe, seeds, device, args.parallel, overrides, tag, args.runs, shlex.join(command))
        if path.exists():
            records[(tag, recipe)] = json.loads(path.read_text())
        else:
            print(f"{what}: no record {path.relative_to(ROOT)} (left out of the table)", file=sys.stderr)
    rows = summarise(records)
    out = {"what": (__doc__ or "").split("\n")[0], "device": str(device), "machine": processor(),
           "command": " ".join(["python", "benchmarks/sat_shapes.py", *sys.argv[1:]]), "rows": rows}
    (RESULTS / f"sat_shapes_{device.type}.json").write_text(json.dumps(out, indent=1) + "\n")
    (RESULTS / f"sat_shapes_{device.type}.md").write_text(table(rows) + "\n")
    print(table(rows))


if __name__ == "__main__":
    main()
