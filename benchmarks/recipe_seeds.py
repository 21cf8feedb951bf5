"""What re-training a recipe gives: the recipe run with several seeds, each scored like its card.

    python benchmarks/recipe_seeds.py --recipes vae_digits,skipgram_synthetic --seeds 0,1,2,3,4
    python benchmarks/recipe_seeds.py --recipes sat_shapes_soft --seeds 0,1,2 --parallel 2
    python benchmarks/recipe_seeds.py --recipes vae_digits --write-cards   # + the spread onto its card
    python benchmarks/recipe_seeds.py --recipes vae_digits --cards-only    # recorded spread -> cards

A sweep over ``seed`` alone (``python -m zoo.sweep recipe=R seed=0,1,2 threads=1``, see docs/sweeps.md):
every run is `python -m zoo.train recipe=R seed=S threads=1 test_after_fit=false` in its own process (one
torch thread, as the cards were trained), then its last.ckpt is scored by `zoo.evaluate` here (one
thread): the same scoring as `python -m zoo.evaluate <card>`, which seeds the test with the run's seed
(a test straight after training goes on from training's random stream). `seed=` changes the
initialisation and the sampling; data splits are the datamodule's `data.seed` and stay fixed. The
sweep's folder is <--runs>/sweeps/<recipe>[_<tag>]: started again, it skips the seeds that ended
(delete the folder for a fresh record). Writes every run (failures too: exit status and the last
error line) and mean / sd / min / max of every test metric to benchmarks/results/seeds_<recipe>_<device>.json.

`--write-cards` copies that spread onto every pretrained card trained from the recipe (field
`recipe_seeds`), so a user reads what re-training gives next to the released numbers;
`tests/test_pretrained_cards.py` (slow, `make reproduce`) re-trains the recipe and checks it lands
inside the recorded spread.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

from devices import accelerator, add_device_option, describe, processor, resolve_device
from spread import fmt, spread  # (puts this checkout's zoo on the path)

from zoo.sweep import run_sweep

ROOT = Path(__file__).resolve().parent.parent


def scored(summary: dict, recipe: str) -> list[dict]:
    """The record's runs (recipe, seed, args, wall_s, rc, metrics, error), each succeeded run's last.ckpt
    scored by ``zoo.evaluate`` (one torch thread)."""
    import torch

    from zoo.evaluate import evaluate

    torch.set_num_threads(1)
    rows = []
    for r in summary["runs"]:
        row = {"recipe": recipe, "seed": int(r["values"]["seed"]), "args": r.get("command", ""),
               "wall_s": r.get("wall_s"), "rc": r["rc"], "metrics": {}}
        if r["rc"] == 0:
            row["metrics"] = evaluate(str(Path(r["run_dir"]) / "checkpoints" / "last.ckpt"))
        elif r.get("error"):
            row["error"] = r["error"]
        rows.append(row)
    return rows


def summarise(rows: list[dict]) -> dict:
    names = dict.fromkeys(k for r in rows for k in r["metrics"])
    return {k: spread([r["metrics"].get(k) if r["rc"] == 0 else None for r in rows]) for k in names}


def write_cards(recipe: str, record: dict, out: Path) -> list[str]:
    """Put the recipe's seed spread onto every card trained from it; returns the cards' names."""
    sys.path.insert(0, str(ROOT))
    from zoo.hub import PRETRAINED_DIR

    done = []
    for path in sorted(PRETRAINED_DIR.glob("*.json")):
        card = json.loads(path.read_text())
        if card.get("recipe") != recipe:
            continue
        card["recipe_seeds"] = {
            "what": "this card's recipe re-trained with each seed and scored like the card",
            "command": record["command"], "device": record["device"], "threads": 1,
            "processor": record.get("processor", "not recorded"),
            "seeds": record["seeds"], "record": out.relative_to(ROOT).as_posix(),
            "metrics": {k: {f: s[f] for f in ("mean", "sd", "min", "max", "n", "failed")}
                        for k, s in record["summary"].items() if k in card["metrics"]},
        }
        path.write_text(json.dumps(card, indent=1) + "\n")
        done.append(card["name"])
    return done


def record_path(recipe: str, tag: str, device_type: str) -> Path:
    """Where a recipe's seed record lives: benchmarks/results/seeds_<recipe>[_<tag>]_<device type>.json."""
    return ROOT / "benchmarks" / "results" / f"seeds_{recipe}{'_' + tag if tag else ''}_{device_type}.json"


def train_seeds(recipe: str, seeds: list[int], device, parallel: int, extra: list[str], tag: str, runs: str,
                command: str) -> tuple[dict, Path]:
    """Every seed of a recipe through ``zoo.sweep`` (``parallel`` runs at once, one torch thread each) ->
    the record, written to ``record_path``; returns the record and its path."""
    acc, devices = accelerator(device)
    t0 = time.time()
    fixed = [f"run_dir={runs}", f"trainer.accelerator={acc}", f"trainer.devices={devices}", "threads=1",
             "test_after_fit=false", *extra]
    summary = run_sweep(recipe, {"seed": [str(s) for s in seeds]}, fixed, parallel,
                        name=f"{Path(recipe).stem}_{tag}" if tag else Path(recipe).stem, yes=True, command=command)
    rows = scored(summary, recipe)
    record = {
        "recipe": recipe, "seeds": seeds, "extra": extra, "command": command,
        "device": str(device), "device_name": describe(device),
        "machine": f"{platform.machine()}, {platform.python_version()}", "processor": processor(),
        "parallel": parallel, "total_s": round(time.time() - t0, 1),
        "summary": summarise(rows), "runs": rows,
    }
    out = record_path(recipe, tag, device.type)
    out.write_text(json.dumps(record, indent=1) + "\n")
    return record, out


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    add_device_option(ap)
    ap.add_argument("--recipes", required=True, help="comma-separated recipe names")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--parallel", type=int, default=1, help="runs at once (each uses one torch thread)")
    ap.add_argument("--extra", nargs="*", default=[], help="key=value overrides added to every run")
    ap.add_argument("--tag", default="", help="added to the JSON's name, for a variant made with --extra")
    ap.add_argument("--runs", default="runs/bench_recipe_seeds", help="run folders go here")
    ap.add_argument("--write-cards", action="store_true", help="record the spread on the recipe's cards")
    ap.add_argument("--cards-only", action="store_true",
                    help="train nothing: copy the recorded spreads (results/seeds_RECIPE_DEVICE.json) to the cards")
    args = ap.parse_args()
    device = resolve_device(args.device)
    seeds = [int(s) for s in args.seeds.split(",")]
    for recipe in args.recipes.split(","):
        if args.cards_only:  # e.g. after a card was re-exported
            out = record_path(recipe, "", device.type)
            print(recipe, "cards updated:", ", ".join(write_cards(recipe, json.loads(out.read_text()), out)) or "none")
            continue
        command = " ".join(["python", "benchmarks/recipe_seeds.py", *sys.argv[1:]])
        record, out = train_seeds(recipe, seeds, device, args.parallel, args.extra, args.tag, args.runs, command)
        print(f"{recipe} over seeds {seeds} ({record['total_s']:.0f} s) -> {out.relative_to(ROOT)}")
        for k, s in record["summary"].items():
            print(f"  {k:<36} {fmt(s, 4):>20}   runs {s['values']}")
        if args.write_cards and not args.extra:  # a card records its own recipe, not a variant
            print("  cards updated:", ", ".join(write_cards(recipe, record, out)) or "none")


if __name__ == "__main__":
    main()
