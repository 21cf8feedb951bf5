"""``benchmarks/recipe_seeds.py``'s work: a recipe re-trained over seeds through ``zoo.sweep``, each run's
last.ckpt scored as its card is (``zoo.evaluate``), the record written, the spread put onto the cards."""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path

import torch

from benchmarks.common.devices import accelerator, describe, processor
from zoo.evaluate import evaluate
from zoo.loading import PRETRAINED_DIR
from zoo.spread import spread
from zoo.sweep import run_sweep

ROOT = Path(__file__).resolve().parents[2]  # the checkout (this folder is benchmarks/common/)


def scored(summary: dict, recipe: str) -> list[dict]:
    """The record's runs (recipe, seed, args, wall_s, rc, metrics, error), each succeeded run's last.ckpt
    scored by ``zoo.evaluate`` (one torch thread)."""
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
