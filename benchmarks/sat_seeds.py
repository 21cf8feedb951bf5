"""Seed and device sweep of the shapes captioning recipes (issue 15): each variant x each seed.

    python benchmarks/sat_seeds.py --device cuda --variants soft,hard,hard_long --seeds 0,1,2
    python benchmarks/sat_seeds.py --device cpu --variants hard --seeds 0      # the card's run

Each variant is a seed sweep through `benchmarks.common.seeds.train_seeds` (`zoo.sweep`: every run its own process
with one torch thread, its last.ckpt scored by `zoo.evaluate`), and every variant's seeds go at once, all
variants at the same time (meant for a machine with many cores, and a GPU for --device cuda). Each variant
also leaves its record, benchmarks/results/seeds_<recipe>_<variant>_<device>.json.
`seed=` changes the model's initialisation and sampling; the scenes and the data order are the
data seed's and stay fixed. Writes every run, failures included (rc, the error), and a summary
(mean, sd per variant) to --out, again as each variant ends. The recorded sweep
(benchmarks/results/sat_seeds_h100.json) ran the variants on the H100 machine in two batches of
parallel runs; its rows carry each run's arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's zoo and helpers, not an installed zoo
from benchmarks.common.devices import add_device_option, describe, processor, resolve_device
from benchmarks.common.seeds import train_seeds
from zoo.spread import spread

LONG_HARD = ["trainer.max_epochs=12", "model.expected_context_hold=1200", "model.expected_context_anneal=600"]
RLOO = ["model.score_cost=sum", "model.estimator={name: rloo, n: 4, entropy_weight: 0.002}"]
COSINE = ["model.lr_schedule=cosine"]
VARIANTS = {  # name -> (recipe, overrides)
    "soft": ("sat_shapes_soft", []),  # the recipe (20 epochs, EMA weights; 6 epochs in the H100 record)
    "soft_long": ("sat_shapes_soft", ["trainer.max_epochs=12"]),
    "soft_cos": ("sat_shapes_soft", COSINE),
    "soft_long_cos": ("sat_shapes_soft", COSINE + ["trainer.max_epochs=12"]),
    "hard": ("sat_shapes_hard", []),  # the recipe (the soft card's frozen encoder, 20 epochs, Adam 1e-3)
    "hard_scratch": ("sat_shapes_hard_scratch", []),  # the same, encoder trained from pixels
    # on a GPU without TF32 (cuDNN's convolutions use it by default): how much of the CPU-GPU spread is it?
    "soft_fp32": ("sat_shapes_soft", ["matmul_precision=highest"]),
    "hard_fp32": ("sat_shapes_hard", ["matmul_precision=highest"]),
    # the H100 record's hard variants (encoder from pixels; 6 epochs then)
    "hard_rloo4": ("sat_shapes_hard_scratch", RLOO),
    "hard_long": ("sat_shapes_hard_scratch", LONG_HARD),
    "hard_long_rloo4": ("sat_shapes_hard_scratch", LONG_HARD + RLOO),
    "hard_long_cos": ("sat_shapes_hard_scratch", COSINE + LONG_HARD),
    "hard_long_rloo4_cos": ("sat_shapes_hard_scratch", COSINE + LONG_HARD + RLOO),
}
SHOWN = ("variant", "seed", "rc", "wall_s", "test/bleu4", "test/att_localisation")


def run(variant: str, seeds: list[int], device, run_root: str, command: str) -> list[dict]:
    """A variant's seeds through ``train_seeds`` -> one row per run, its test metrics at the top level."""
    recipe, extra = VARIANTS[variant]
    record, _ = train_seeds(recipe, seeds, device, len(seeds), extra, variant, run_root, command)
    rows = []
    for r in record["runs"]:
        row = {"variant": variant, "device": str(device), **r}
        row.update(row.pop("metrics", {}))  # test/* at the top level, as the recorded sweeps have them
        print(json.dumps({k: row.get(k) for k in SHOWN}), flush=True)
        rows.append(row)
    return rows


def summarise(rows: list[dict]) -> dict:
    """Per variant: runs, failures, and the spread (benchmarks/spread.py) of BLEU-4 and localisation."""
    out = {}
    for variant in dict.fromkeys(r["variant"] for r in rows):
        mine = [r for r in rows if r["variant"] == variant]
        entry = {"runs": len(mine), "failed": sum(r["rc"] != 0 for r in mine)}
        for key, name in (("test/bleu4", "bleu4"), ("test/att_localisation", "loc")):
            s = spread([r.get(key) if r["rc"] == 0 else None for r in mine])
            entry.update({name: s["values"], f"{name}_mean": s["mean"], f"{name}_sd": s["sd"]})
        out[variant] = entry
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    add_device_option(ap)
    ap.add_argument("--variants", default="soft,hard,hard_long,hard_long_rloo4",
                    help=f"comma-separated, from: {', '.join(VARIANTS)}")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--runs", default="runs/bench_sat_seeds", help="run folders go here")
    ap.add_argument("--out", default="benchmarks/results/sat_seeds.json")
    args = ap.parse_args()
    device = resolve_device(args.device)
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"unknown variants {unknown}; choose from {', '.join(VARIANTS)}")
    seeds = [int(s) for s in args.seeds.split(",")]
    command = " ".join(["python", "benchmarks/sat_seeds.py", *sys.argv[1:]])
    rows: list[dict] = []
    result = {}
    with ThreadPoolExecutor(len(variants)) as ex:  # the file is rewritten as each variant ends: a sweep cut
        # short by a time limit (a lent GPU's 10-minute commands) keeps the variants that finished
        for done in as_completed([ex.submit(run, v, seeds, device, args.runs, command) for v in variants]):
            rows.extend(done.result())
            result = {"command": command, "device": str(device), "device_name": describe(device),
                      "processor": processor(), "finished": f"{len(rows)} of {len(variants) * len(seeds)} runs",
                      "rows": rows, "summary": summarise(rows)}
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(json.dumps(result, indent=1))
    for variant, s in result["summary"].items():
        print(f"{variant:22s} BLEU-4 {s['bleu4_mean']} ± {s['bleu4_sd']}  localisation {s['loc_mean']} ± {s['loc_sd']}")


if __name__ == "__main__":
    main()
