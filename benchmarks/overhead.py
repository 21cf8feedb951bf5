"""Overhead of the zoo: the same VAE, the same batches, through `zoo.train` (Lightning loop,
checkpoint/signal/NaN/RNG callbacks, CSV logging) vs a plain PyTorch loop. Steps/s side by side.

    python benchmarks/overhead.py [--recipe vae_digits] [--steps 600] [--repeats 3] [--threads 1]

Prints a table and writes benchmarks/results/overhead.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import lightning as L
import torch

from zoo.config import load_config
from zoo.train import build, train


class StepTimer(L.Callback):
    """Wall time from the first to the last training step (excludes Trainer start-up)."""

    seconds = 0.0

    def on_train_start(self, trainer, pl_module):
        StepTimer._t0 = time.perf_counter()

    def on_train_end(self, trainer, pl_module):
        StepTimer.seconds = time.perf_counter() - StepTimer._t0


def zoo_steps_per_second(recipe: str, steps: int, seed: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        train([f"recipe={recipe}", f"run_dir={tmp}", f"threads={torch.get_num_threads()}",
               f"trainer.max_steps={steps}", "trainer.max_epochs=-1",
               "trainer.limit_val_batches=0", "trainer.num_sanity_val_steps=0", "trainer.enable_progress_bar=false",
               "trainer.enable_model_summary=false", "test_after_fit=false", f"seed={seed}",
               "callbacks=[{name: '__main__:StepTimer'}]"])
    return steps / StepTimer.seconds


def plain_steps_per_second(recipe: str, steps: int, seed: int) -> float:
    cfg = load_config(recipe, [f"seed={seed}"])
    L.seed_everything(seed, verbose=False)
    datamodule, model = build(cfg)
    model.log = model.log_dict = lambda *a, **k: None  # a plain loop logs nothing
    optimizer = model.configure_optimizers()
    loader = datamodule.train_dataloader()
    model.train()
    done = 0
    t0 = time.perf_counter()
    while done < steps:
        for i, batch in enumerate(loader):
            loss = model.training_step(batch, i)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            done += 1
            if done == steps:
                break
    return steps / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="vae_digits")
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads for both loops")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "overhead.json"))
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(args.threads)
    zoo_runs, plain_runs = [], []
    for r in range(args.repeats):  # interleaved, so machine load hits both alike
        plain_runs.append(plain_steps_per_second(args.recipe, args.steps, seed=r))
        zoo_runs.append(zoo_steps_per_second(args.recipe, args.steps, seed=r))
    zoo_sps, plain_sps = statistics.median(zoo_runs), statistics.median(plain_runs)
    overhead = plain_sps / zoo_sps - 1.0
    result = {"recipe": args.recipe, "steps": args.steps, "repeats": args.repeats,
              "torch_threads": torch.get_num_threads(),
              "zoo_steps_per_s": zoo_sps, "plain_steps_per_s": plain_sps, "zoo_runs": zoo_runs,
              "plain_runs": plain_runs, "overhead_fraction": overhead}
    print(f"{'loop':<12} {'steps/s (median)':>18}   runs")
    print(f"{'plain torch':<12} {plain_sps:>18.1f}   {', '.join(f'{v:.1f}' for v in plain_runs)}")
    print(f"{'zoo.train':<12} {zoo_sps:>18.1f}   {', '.join(f'{v:.1f}' for v in zoo_runs)}")
    print(f"overhead of zoo.train: {100 * overhead:+.1f} % (target < 5 %)")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
