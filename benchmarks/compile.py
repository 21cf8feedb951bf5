"""Training speed with the recipe key ``compile`` against without, for each model that takes it (its spec's
``compiled``): the same recipe through ``zoo.train`` twice, eager and compiled, side by side in one process and
interleaved over repeats, so that machine load hits both alike.

    python benchmarks/compile.py [--steps 60] [--repeats 3] [--threads 1] [--backend inductor] [--mode default]
                                 [--models vae,dvae,ood,seqgan,sat] [--device cuda]

A run's steady rate is one over its median step time (the time between the ends of consecutive training
batches, ``training_step`` calls), so the steps that compile (the first, and any recompile for a new batch shape
or training mode) and the checkpoint saves weigh nothing in it; the compile time, counted apart, is the compiled
run's time over its steady rate (steps x median) less the eager run's, and dynamo's own count of seconds spent
compiling (``_compile.compile_inner``) is recorded beside it. Each compiled run starts from ``torch._dynamo.reset()``;
inductor's on-disk cache of generated code is kept, as a user's second run finds it, so the first repeat's
compile is the cold one. Prints the table and writes benchmarks/results/compile_<device type>.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import lightning as L
import torch
from torch._dynamo.utils import compilation_time_metrics

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's zoo and helpers, not an installed zoo
from benchmarks.common.devices import accelerator, add_device_option, describe, processor, resolve_device, synchronize
from zoo.registry import MODELS
from zoo.train import train

# model -> (recipe, overrides): a recipe of each model that takes compile, in the phase where its compiled nets run
CASES = {
    "vae": ("vae_digits", []),
    "dvae": ("dvae_digits", []),
    "ood": ("ood_digits_joint", []),  # classifier, generator and discriminator
    "seqgan": ("seqgan_oracle_small", ["model.mle_epochs=0"]),  # D's pre-training first: D is what is compiled
    "sat": ("sat_shapes_soft", []),
}


class StepClock(L.Callback):
    """The time at which each training batch ends, from the start of training."""

    ends: list[float] = []

    def on_train_start(self, trainer, pl_module):
        synchronize(pl_module.device)
        StepClock.ends = [time.perf_counter()]

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        synchronize(pl_module.device)
        StepClock.ends.append(time.perf_counter())


def dynamo_seconds() -> float:
    """Seconds dynamo has spent compiling in this process (tracing and the backend's compile of the forward)."""
    return sum(compilation_time_metrics.get("_compile.compile_inner", []))


def one_run(recipe: str, overrides: list[str], steps: int, seed: int, device: torch.device,
            compile_value: str | None) -> dict:
    """``steps`` training batches of ``recipe`` (validation and testing off), eager or with ``compile=...``:
    its median step time, total time and dynamo's compile seconds."""
    acc, devices = accelerator(device)
    if compile_value is not None:
        torch._dynamo.reset()
    before = dynamo_seconds()
    with tempfile.TemporaryDirectory() as tmp:
        train([f"recipe={recipe}", *overrides, f"run_dir={tmp}", f"threads={torch.get_num_threads()}",
               f"trainer.accelerator={acc}", f"trainer.devices={devices}", f"trainer.max_steps={steps}",
               "trainer.max_epochs=-1", "trainer.limit_val_batches=0", "trainer.num_sanity_val_steps=0",
               "trainer.enable_progress_bar=false", "trainer.enable_model_summary=false", "test_after_fit=false",
               "logger=[]", f"seed={seed}", "callbacks=[{name: '__main__:StepClock'}]",
               *([f"compile={compile_value}"] if compile_value is not None else [])])
    ends = StepClock.ends
    times = [b - a for a, b in zip(ends, ends[1:])]
    return {"batches": len(times), "median_step_s": statistics.median(times), "total_s": ends[-1] - ends[0],
            "dynamo_compile_s": dynamo_seconds() - before}


def excess(run: dict) -> float:
    """A run's seconds over its steady rate."""
    return run["total_s"] - run["batches"] * run["median_step_s"]


def compile_value(backend: str, mode: str | None) -> str:
    return f"{{backend: {backend}" + (f", mode: {mode}}}" if mode else "}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--steps", type=int, default=60, help="training batches a run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--backend", default="inductor")
    parser.add_argument("--mode", default=None, help="torch.compile's mode (default: its own)")
    parser.add_argument("--models", default=",".join(CASES), help="comma-separated, of " + ", ".join(CASES))
    parser.add_argument("--out", default=None, help="default: benchmarks/results/compile_<device type>.json")
    add_device_option(parser)
    args = parser.parse_args()
    device = resolve_device(args.device)
    warnings.filterwarnings("ignore")
    torch.set_num_threads(args.threads)
    models = args.models.split(",")
    for name in models:
        if name not in CASES:
            raise SystemExit(f"--models: unknown model {name!r} (choose from {', '.join(CASES)})")
        if not isinstance(MODELS.spec(name).compiled, tuple):
            raise SystemExit(f"--models: {name} takes no compile: {MODELS.spec(name).compiled}")
    value = compile_value(args.backend, args.mode)
    runs: dict[str, dict[str, list[dict]]] = {name: {"eager": [], "compiled": []} for name in models}
    for r in range(args.repeats):  # interleaved: each model's two arms back to back, every repeat
        for name in models:
            recipe, overrides = CASES[name]
            for arm, given in (("eager", None), ("compiled", value)):
                runs[name][arm].append(one_run(recipe, overrides, args.steps, r, device, given))
    table = {}
    for name in models:
        eager, compiled = runs[name]["eager"], runs[name]["compiled"]
        sps = {arm: 1 / statistics.median(run["median_step_s"] for run in runs[name][arm]) for arm in runs[name]}
        table[name] = {"recipe": CASES[name][0], "overrides": CASES[name][1],
                       "compiled": list(MODELS.spec(name).compiled),
                       "steps_per_s": sps, "ratio": sps["compiled"] / sps["eager"],
                       "compile_s": [excess(c) - excess(e) for c, e in zip(compiled, eager)],
                       "dynamo_compile_s": [c["dynamo_compile_s"] for c in compiled], "runs": runs[name]}
    print(f"{'model':<7} {'recipe':<20} {'eager steps/s':>13} {'compiled':>9} {'ratio':>6}   compile s (per repeat)")
    for name, row in table.items():
        sps = row["steps_per_s"]
        print(f"{name:<7} {row['recipe']:<20} {sps['eager']:>13.1f} {sps['compiled']:>9.1f} {row['ratio']:>5.2f}x   "
              f"{', '.join(f'{s:.1f}' for s in row['compile_s'])}")
    result = {"command": "python " + " ".join(sys.argv), "device": str(device), "device_name": describe(device),
              "machine": processor(), "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
              "steps": args.steps, "repeats": args.repeats, "compile": value, "models": table}
    out = Path(args.out or Path(__file__).parent / "results" / f"compile_{device.type}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
