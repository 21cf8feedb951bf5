"""Re-training a recipe with several seeds, each run in its own process with one torch thread and
scored like its card (`zoo.evaluate` of its `last.ckpt`): the library half of benchmarks/recipe_seeds.py."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from zoo.bench.devices import accelerator, describe, processor
from zoo.bench.spread import spread
from zoo.hub import PRETRAINED_DIR

ROOT = Path(__file__).resolve().parents[2]  # the repository (benchmarks/results/ under it)
CHILD = r"""
import json, sys, time
import torch
torch.set_num_threads(1)
from zoo.train import train
from zoo.evaluate import evaluate
t0 = time.time()
r = train(sys.argv[1:] + ["test_after_fit=false"])
fit = time.time() - t0
m = evaluate(str(r.run_dir / "checkpoints" / "last.ckpt"))
print("BENCH", json.dumps({"fit_s": fit, "metrics": m}))
"""


def run(recipe: str, seed: int, device, run_root: str, extra: list[str], name: str = "") -> dict:
    """One `zoo.train` + `zoo.evaluate` of its last.ckpt in a fresh process (one torch thread);
    the run folder is <run_root>/<name or recipe>_<seed>. Returns the row: args, wall_s, rc,
    fit_s, metrics (or the end of stderr when it failed)."""
    acc, devices = accelerator(device)
    args = [f"recipe={recipe}", f"seed={seed}", f"trainer.accelerator={acc}", f"trainer.devices={devices}",
            f"run_dir={run_root}/{name or recipe}_{seed}", "trainer.enable_progress_bar=false", *extra]
    t0 = time.time()
    p = subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, text=True, cwd=ROOT)
    row = {"recipe": recipe, "seed": seed, "args": args, "wall_s": round(time.time() - t0, 1), "rc": p.returncode}
    for line in p.stdout.splitlines():
        if line.startswith("BENCH "):
            row.update(json.loads(line[6:]))
    if p.returncode:
        row["error"] = p.stderr[-2000:]
    print(f"{name or recipe} seed {seed}: rc {p.returncode}, {row['wall_s']:.0f} s", flush=True)
    return row


def summarise(rows: list[dict]) -> dict:
    names = dict.fromkeys(k for r in rows for k in r.get("metrics", {}))
    return {k: spread([r["metrics"].get(k) if r["rc"] == 0 else None for r in rows]) for k in names}


def write_cards(recipe: str, record: dict, out: Path) -> list[str]:
    """Put the recipe's seed spread onto every card trained from it; returns the cards' names."""
    sys.path.insert(0, str(ROOT))

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
    """Every seed of a recipe (`parallel` runs at once) -> the record, written to ``record_path``;
    returns the record and its path."""
    t0 = time.time()
    with ThreadPoolExecutor(parallel) as ex:
        rows = list(ex.map(lambda s: run(recipe, s, device, runs, extra, f"{recipe}_{tag}" if tag else ""), seeds))
    record = {
        "recipe": recipe, "seeds": seeds, "extra": extra, "command": command,
        "device": str(device), "device_name": describe(device),
        "machine": f"{platform.machine()}, {platform.python_version()}", "processor": processor(),
        "parallel": parallel, "total_s": round(time.time() - t0, 1), "summary": summarise(rows), "runs": rows,
    }
    out = record_path(recipe, tag, device.type)
    out.write_text(json.dumps(record, indent=1) + "\n")
    return record, out
