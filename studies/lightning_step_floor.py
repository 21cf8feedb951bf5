"""What Lightning's training loop costs a step whatever the model: a plain PyTorch loop against a bare
``lightning.Trainer`` (no logger, callbacks, checkpoints or progress bar) on an MLP regression whose width sets the
step's time, interleaved, in this process's CPU time a step (the least of ``--repeats``, all interleaved).

The difference, in microseconds, is the loop's fixed cost; the overhead a model sees is that cost over its own
step's time. A third loop is Lightning as ``zoo.train`` sets it up to the same result (``QuietProfiler``: one
reused null context for the ~25 profiler contexts a step; the callbacks' and the model's empty per-batch hooks left
out of the dispatch; ``zoo/callbacks/hooks.py``): what remains is the floor no setting removes. The Python calls a
step of each loop are counted by cProfile (exact; its times are not used).

    python studies/lightning_step_floor.py [--widths 16,128,512] [--steps 2000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import sys
import time
import warnings
from pathlib import Path

import lightning as L
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's benchmarks/common/

from benchmarks.common.devices import (  # noqa: E402
    accelerator,
    add_device_option,
    describe,
    processor,
    resolve_device,
    synchronize,
)
from zoo.callbacks.hooks import QuietProfiler, skip_empty_batch_hooks, skip_empty_module_hooks  # noqa: E402

DEVICE = torch.device("cpu")  # set by --device


class MLP(L.LightningModule):
    """Two hidden layers of ``width``, MSE on a fixed batch of 64: the step's time grows with the width."""

    def __init__(self, width: int, steps: int):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(32, width), torch.nn.ReLU(), torch.nn.Linear(width, width),
                                       torch.nn.ReLU(), torch.nn.Linear(width, 1))
        g = torch.Generator().manual_seed(0)  # cpu: the batches are the loader's, moved to the device by each loop
        x, y = torch.randn(64, 32, generator=g), torch.randn(64, 1, generator=g)  # cpu: as above
        self.batches = [(x, y)] * steps

    def training_step(self, batch, batch_idx):
        x, y = batch  # (64, 32), (64, 1)
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)

    def train_dataloader(self):
        return torch.utils.data.DataLoader(self.batches, batch_size=None)


class Clock(L.Callback):
    """This process's CPU seconds from the first to the last training step."""

    seconds = 0.0
    profile: cProfile.Profile | None = None

    def on_train_start(self, trainer, pl_module):
        synchronize(pl_module.device)
        if Clock.profile is not None:
            Clock.profile.enable()
        Clock.t0 = time.process_time()

    def on_train_end(self, trainer, pl_module):
        synchronize(pl_module.device)
        Clock.seconds = time.process_time() - Clock.t0
        if Clock.profile is not None:
            Clock.profile.disable()


def plain(width: int, steps: int, profile: cProfile.Profile | None = None) -> float:
    torch.manual_seed(0)
    model = MLP(width, steps).to(DEVICE)
    optimizer = model.configure_optimizers()
    synchronize(DEVICE)
    if profile is not None:
        profile.enable()
    t0 = time.process_time()
    for i, (x, y) in enumerate(model.train_dataloader()):
        loss = model.training_step((x.to(DEVICE), y.to(DEVICE)), i)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    synchronize(DEVICE)
    seconds = time.process_time() - t0
    if profile is not None:
        profile.disable()
    return seconds


def lightning(width: int, steps: int, profile: cProfile.Profile | None = None, lighter: bool = False) -> float:
    torch.manual_seed(0)
    acc, devices = accelerator(DEVICE)
    trainer = L.Trainer(accelerator=acc, devices=devices, max_steps=steps, max_epochs=-1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        callbacks=[Clock()], profiler=QuietProfiler() if lighter else None)
    model = MLP(width, steps)
    if lighter:
        skip_empty_batch_hooks(trainer.callbacks)
        skip_empty_module_hooks(model)
    Clock.profile = profile
    trainer.fit(model)
    Clock.profile = None
    return Clock.seconds


def lightning_as_zoo(width: int, steps: int, profile: cProfile.Profile | None = None) -> float:
    """Lightning with what zoo.train sets to the same end: QuietProfiler, the empty batch hooks left out."""
    return lightning(width, steps, profile, lighter=True)


def calls_per_step(fn, width: int, steps: int) -> float:
    profile = cProfile.Profile()
    fn(width, steps, profile)
    return sum(v[1] for v in pstats.Stats(profile).stats.values()) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--widths", default="16,128,512")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default=str(ROOT / "studies" / "results" / "lightning_step_floor.json"))
    add_device_option(parser)
    args = parser.parse_args()
    global DEVICE
    DEVICE = resolve_device(args.device)
    warnings.filterwarnings("ignore")
    torch.set_num_threads(args.threads)
    loops = {"plain torch": plain, "bare Lightning": lightning, "Lightning as zoo.train sets it": lightning_as_zoo}
    widths = [int(w) for w in args.widths.split(",")]
    runs = {w: {name: [] for name in loops} for w in widths}  # us a step of each repeat
    for _ in range(args.repeats):  # interleaved, widths and loops, so the machine's changing load hits all alike
        for width in widths:
            for name, fn in loops.items():
                runs[width][name].append(1e6 * fn(width, args.steps) / args.steps)
    rows = []
    for width in widths:
        # the least of the repeats: a loop's own cost, which other load on the machine only adds to
        us = {name: min(v) for name, v in runs[width].items()}
        calls = {name: calls_per_step(fn, width, min(args.steps, 500)) for name, fn in loops.items()}
        row = {"width": width, "us_per_step": us, "runs_us": runs[width], "python_calls_per_step": calls,
               "lightning_fixed_us": us["bare Lightning"] - us["plain torch"],
               "lightning_overhead": us["bare Lightning"] / us["plain torch"] - 1,
               "zoo_settings_fixed_us": us["Lightning as zoo.train sets it"] - us["plain torch"]}
        rows.append(row)
        print(f"width {width:>5}: " + ", ".join(f"{k} {v:.0f} us ({calls[k]:.0f} calls)" for k, v in us.items())
              + f"; Lightning +{row['lightning_fixed_us']:.0f} us = {100 * row['lightning_overhead']:+.1f} %")
    fixed = statistics.median(r["lightning_fixed_us"] for r in rows)
    floor = statistics.median(r["zoo_settings_fixed_us"] for r in rows)
    result = {"command": "python " + " ".join(sys.argv), "device": str(DEVICE), "device_name": describe(DEVICE),
              "machine": processor(), "torch_threads": torch.get_num_threads(), "steps": args.steps,
              "repeats": args.repeats, "lightning": L.__version__, "torch": torch.__version__, "rows": rows,
              "lightning_fixed_us_median": fixed, "zoo_settings_fixed_us_median": floor,
              "step_us_for_5_percent": floor / 0.05}
    print(f"Lightning's loop: +{fixed:.0f} us a step, +{floor:.0f} us as zoo.train sets it (medians over widths): "
          f"within 5 % of plain torch from a {floor / 50:.1f} ms step")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
