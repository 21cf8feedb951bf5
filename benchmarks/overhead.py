"""Overhead of the zoo: the same VAE, the same batches, through `zoo.train` (Lightning loop,
checkpoint/signal/NaN/RNG callbacks, CSV logging) vs a plain PyTorch loop, with a bare
`lightning.Trainer` (no logger, callbacks or checkpoints) in between to show where the cost lies.
Steps/s side by side, interleaved so machine load hits all three alike, in wall time and in this process's CPU
time (which other processes on a loaded machine do not inflate; waits for the disk, fsync of a checkpoint, are
in wall time only).

    python benchmarks/overhead.py [--recipe vae_digits] [--steps 600] [--repeats 3] [--threads 1] [--device cuda]
                                  [--profile-steps 300]

`--recipe vae_mnist` runs the MNIST-sized VAE (784-512-32, batch 100) on random images written
in MNIST's IDX format to a temporary folder (speed does not depend on the pixels).
Prints a table and writes benchmarks/results/overhead_<recipe>.json, then profiles ``--profile-steps`` steps of
each loop (cProfile: its times are inflated, its call counts exact) into overhead_<recipe>_profile.txt beside it:
where zoo.train's step still costs more than bare Lightning's, and Lightning's more than the plain loop's.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import lightning as L
import torch
from lightning.fabric.utilities.apply_func import move_data_to_device

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's zoo and helpers, not an installed zoo
from benchmarks.common.devices import accelerator, add_device_option, describe, processor, resolve_device, synchronize
from zoo.config import load_config
from zoo.core.nvml import skip_failing_nvml_check
from zoo.train import build, train

DEVICE = torch.device("cpu")  # set by --device
PROFILE: cProfile.Profile | None = None  # set by profile_loops: the training steps of the next loop are profiled


class StepTimer(L.Callback):
    """Wall time from the first to the last training step (excludes Trainer start-up), and this process's CPU time
    in between (what other processes on a loaded machine take shows in the wall time only)."""

    seconds = 0.0
    cpu_seconds = 0.0

    def on_train_start(self, trainer, pl_module):
        synchronize(pl_module.device)
        if PROFILE is not None:
            PROFILE.enable()
        StepTimer._t0, StepTimer._c0 = time.perf_counter(), time.process_time()

    def on_train_end(self, trainer, pl_module):
        synchronize(pl_module.device)
        StepTimer.seconds = time.perf_counter() - StepTimer._t0
        StepTimer.cpu_seconds = time.process_time() - StepTimer._c0
        if PROFILE is not None:
            PROFILE.disable()


def zoo_steps_per_second(recipe: str, steps: int, seed: int, data: list[str]) -> tuple[float, float]:
    """Steps a second of wall time and of this process's CPU time (as each loop below)."""
    acc, devices = accelerator(DEVICE)
    with tempfile.TemporaryDirectory() as tmp:
        train([f"recipe={recipe}", *data, f"run_dir={tmp}", f"threads={torch.get_num_threads()}",
               f"trainer.accelerator={acc}", f"trainer.devices={devices}",
               f"trainer.max_steps={steps}", "trainer.max_epochs=-1",
               "trainer.limit_val_batches=0", "trainer.num_sanity_val_steps=0", "trainer.enable_progress_bar=false",
               "trainer.enable_model_summary=false", "test_after_fit=false", f"seed={seed}",
               "callbacks=[{name: '__main__:StepTimer'}]"])
    return steps / StepTimer.seconds, steps / StepTimer.cpu_seconds


def bare_lightning_steps_per_second(recipe: str, steps: int, seed: int, data: list[str]) -> tuple[float, float]:
    cfg = load_config(recipe, [*data, f"seed={seed}"])
    L.seed_everything(seed, verbose=False)
    datamodule, model = build(cfg)
    model.log = model.log_dict = lambda *a, **k: None
    acc, devices = accelerator(DEVICE)
    trainer = L.Trainer(accelerator=acc, devices=devices, max_steps=steps, max_epochs=-1, limit_val_batches=0,
                        num_sanity_val_steps=0,
                        logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[StepTimer()])
    trainer.fit(model, datamodule=datamodule)
    return steps / StepTimer.seconds, steps / StepTimer.cpu_seconds


def plain_steps_per_second(recipe: str, steps: int, seed: int, data: list[str]) -> tuple[float, float]:
    cfg = load_config(recipe, [*data, f"seed={seed}"])
    L.seed_everything(seed, verbose=False)
    datamodule, model = build(cfg)
    datamodule.setup("fit")
    model.log = model.log_dict = lambda *a, **k: None  # a plain loop logs nothing
    optimizer = model.configure_optimizers()
    loader = datamodule.train_dataloader()
    model.to(DEVICE).train()
    done = 0
    synchronize(DEVICE)
    if PROFILE is not None:
        PROFILE.enable()
    t0, c0 = time.perf_counter(), time.process_time()
    while done < steps:
        for i, batch in enumerate(loader):
            loss = model.training_step(move_data_to_device(batch, DEVICE), i)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            done += 1
            if done == steps:
                break
    synchronize(DEVICE)
    seconds, cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
    if PROFILE is not None:
        PROFILE.disable()
    return steps / seconds, steps / cpu_seconds


def where(key: tuple) -> str:
    """A profile entry's function as package/file.py:line(name)."""
    path, line, name = key
    path = path.split("site-packages/")[-1].removeprefix(str(Path(__file__).resolve().parents[1]) + "/")
    return f"{path}:{line}({name})"


def per_step(stats: pstats.Stats, steps: int) -> dict[tuple, tuple[float, float, float]]:
    """{function: (calls, own us, cumulative us) a step} of a profile of ``steps`` steps."""
    return {k: (v[1] / steps, 1e6 * v[2] / steps, 1e6 * v[3] / steps) for k, v in stats.stats.items()}


def table(title: str, rows: list[tuple[str, float, float, float]]) -> list[str]:
    return [f"## {title}", f"{'calls':>8} {'own us':>8} {'cum us':>8}  function",
            *(f"{c:>8.2f} {o:>8.1f} {u:>8.1f}  {name}" for name, c, o, u in rows), ""]


def profile_loops(loops: dict, recipe: str, steps: int, data: list[str], top: int = 25) -> tuple[list[str], dict]:
    """Each loop's ``steps`` steps under cProfile: the report's lines and the calls a step of each loop."""
    global PROFILE
    profiles = {}
    for name, fn in loops.items():
        PROFILE = cProfile.Profile()
        fn(recipe, steps, 0, data)
        profiles[name], PROFILE = per_step(pstats.Stats(PROFILE), steps), None
    calls = {name: sum(c for c, _, _ in p.values()) for name, p in profiles.items()}
    lines = [f"# cProfile of {steps} training steps of each loop ({recipe}); times inflated by the profiler, calls "
             "exact", "python function calls a step: " + ", ".join(f"{k} {v:.0f}" for k, v in calls.items()), ""]
    for more, less in (("zoo.train", "bare Lightning"), ("bare Lightning", "plain torch")):
        a, b = profiles[more], profiles[less]
        diff = {k: tuple(x - y for x, y in zip(a.get(k, (0, 0, 0)), b.get(k, (0, 0, 0)))) for k in set(a) | set(b)}
        # functions called as often in both (the model's, torch's ops) differ by noise only: left out
        rows = sorted(((k, v) for k, v in diff.items() if v[0] > 0.005), key=lambda kv: -kv[1][1])[:top]
        lines += table(f"{more} minus {less}: the extra calls a step and their own time, by function (top {top})",
                       [(where(k), *v) for k, v in rows])
    for order, col in (("own", 1), ("cumulative", 2)):
        rows = sorted(profiles["zoo.train"].items(), key=lambda kv: -kv[1][col])[:top]
        lines += table(f"zoo.train: a step by {order} time (top {top})", [(where(k), *v) for k, v in rows])
    return lines, calls


def fake_mnist(root: Path) -> list[str]:
    """MNIST-shaped random IDX files (60k train, 10k test) under root/mnist."""
    import numpy as np

    from zoo.models.vae.data import write_idx

    rng = np.random.default_rng(0)
    for name, shape in [("train-images-idx3-ubyte", (60000, 28, 28)), ("train-labels-idx1-ubyte", (60000,)),
                        ("t10k-images-idx3-ubyte", (10000, 28, 28)), ("t10k-labels-idx1-ubyte", (10000,))]:
        write_idx(root / "mnist" / name, rng.integers(0, 256 if len(shape) == 3 else 10, shape, dtype=np.uint8))
    return [f"data.root={root}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--recipe", default="vae_digits")
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads for both loops")
    parser.add_argument("--profile-steps", type=int, default=300, help="steps of each loop profiled after the "
                        "timing (0: none)")
    parser.add_argument("--out", default=None, help="default: benchmarks/results/overhead_<recipe>.json")
    add_device_option(parser)
    args = parser.parse_args()
    global DEVICE
    DEVICE = resolve_device(args.device)
    warnings.filterwarnings("ignore")
    torch.set_num_threads(args.threads)
    # as zoo.train does at its start: every loop in this process then runs without it (a plain torch script, which
    # imports no Lightning, never has it)
    nvml_skipped = skip_failing_nvml_check()
    out = args.out or str(Path(__file__).parent / "results" / f"overhead_{args.recipe}.json")
    loops = {"plain torch": plain_steps_per_second, "bare Lightning": bare_lightning_steps_per_second,
             "zoo.train": zoo_steps_per_second}
    runs: dict[str, list[float]] = {name: [] for name in loops}
    cpu_runs: dict[str, list[float]] = {name: [] for name in loops}  # steps a second of this process's CPU time
    with tempfile.TemporaryDirectory() as data_dir:
        data = fake_mnist(Path(data_dir)) if args.recipe in ("vae_mnist", "dvae_mnist") else []
        for r in range(args.repeats):  # interleaved, so machine load hits all loops alike
            for name, fn in loops.items():
                wall, cpu = fn(args.recipe, args.steps, r, data)
                runs[name].append(wall)
                cpu_runs[name].append(cpu)
        profile, calls = profile_loops(loops, args.recipe, args.profile_steps, data) if args.profile_steps else ([], {})
    sps = {name: statistics.median(v) for name, v in runs.items()}
    cpu_ms = {name: 1000 / statistics.median(v) for name, v in cpu_runs.items()}
    plain_ms = 1000 / sps["plain torch"]
    overhead = sps["plain torch"] / sps["zoo.train"] - 1.0
    result = {"recipe": args.recipe, "steps": args.steps, "repeats": args.repeats, "device": str(DEVICE),
              "machine": processor(),
              "device_name": describe(DEVICE), "command": "python " + " ".join(sys.argv),
              "torch_threads": torch.get_num_threads(), "steps_per_s": sps, "runs": runs,
              "ms_per_step": {name: 1000 / v for name, v in sps.items()}, "overhead_fraction": overhead,
              "overhead_over_lightning": sps["bare Lightning"] / sps["zoo.train"] - 1.0,
              "cpu_runs": cpu_runs, "cpu_ms_per_step": cpu_ms,
              "cpu_overhead_fraction": cpu_ms["zoo.train"] / cpu_ms["plain torch"] - 1.0,
              "cpu_overhead_over_lightning": cpu_ms["zoo.train"] / cpu_ms["bare Lightning"] - 1.0,
              "nvml_check_skipped": nvml_skipped, "python_calls_per_step": calls}
    print(f"{'loop':<15} {'steps/s (median)':>17} {'ms/step':>8} {'vs plain':>9} {'CPU ms':>7} {'vs plain':>9}   runs")
    for name, v in sps.items():
        print(f"{name:<15} {v:>17.1f} {1000 / v:>8.2f} {sps['plain torch'] / v - 1:>+8.1%} {cpu_ms[name]:>7.2f} "
              f"{cpu_ms[name] / cpu_ms['plain torch'] - 1:>+8.1%}   {', '.join(f'{x:.1f}' for x in runs[name])}")
    print(f"overhead of zoo.train: {100 * overhead:+.1f} % (target < 5 %); "
          f"{1000 / sps['zoo.train'] - plain_ms:.2f} ms a step on a {plain_ms:.2f} ms step; "
          f"{100 * result['overhead_over_lightning']:+.1f} % over bare Lightning (target <= 3 %); in CPU time "
          f"{100 * result['cpu_overhead_fraction']:+.1f} % and {100 * result['cpu_overhead_over_lightning']:+.1f} %")
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    if profile:
        result["profile"] = Path(out).with_name(Path(out).stem + "_profile.txt").name
        Path(out).with_name(result["profile"]).write_text("\n".join([f"# {result['command']}", *profile]))
        print(f"profile of the remainder: {Path(out).with_name(result['profile'])}")
    Path(out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
