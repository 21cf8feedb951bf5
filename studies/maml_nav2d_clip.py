"""Why maml_nav2d collapsed on seed 3, and what clipping the meta-gradient does: the meta-gradient's norm at
every meta-iteration (before any clipping) and the validation return, for seeds with and without
``trainer.gradient_clip_val=1.0``, over the first ``--steps`` meta-iterations.

    python studies/maml_nav2d_clip.py --seeds 0,3 --steps 150 --out studies/results/2026-12-03-maml_nav2d_clip.json

Each run is ``python -m zoo.train recipe=maml_nav2d seed=S trainer.max_steps=N trainer.gradient_clip_val=C`` in
its own process (one thread) with this file's ``GradNorm`` callback; clip 0 is Lightning's "no clipping";
``--extra`` adds overrides to every run (the study's ``model.squash_mean=true`` was an option added for its run
and removed: studies/2026-12-03-maml-nav2d-collapse.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.utilities import grad_norm

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))  # this checkout's zoo and helpers, not an installed zoo
from benchmarks.common.devices import accelerator, add_device_option, resolve_device  # noqa: E402


class GradNorm(L.Callback):
    """The meta-gradient's total 2-norm at each optimizer step, before Lightning clips it, the policy's mean
    action at the start state, and val/return_1 at each validation; written to <run folder>/grad_norm.json at
    the end of fit."""

    def __init__(self):
        self.rows: list[dict] = []
        self.val: list[dict] = []

    def on_before_optimizer_step(self, trainer, pl_module, optimizer):
        norm = float(grad_norm(pl_module, norm_type=2)["grad_2.0_norm_total"])
        start = torch.zeros(2, device=pl_module.device, dtype=pl_module.dtype)  # the origin, where every episode begins
        with torch.no_grad():
            mean, std = pl_module.policy(start)
        self.rows.append({"step": trainer.global_step, "grad_norm": norm,
                          "mean_at_start": [round(v, 4) for v in mean.tolist()],
                          "std": [round(v, 4) for v in std.tolist()]})

    def on_validation_end(self, trainer, pl_module):
        if not trainer.sanity_checking:
            self.val.append({"step": trainer.global_step,
                             "val/return_1": float(trainer.callback_metrics["val/return_1"])})

    def on_fit_end(self, trainer, pl_module):
        Path(trainer.default_root_dir, "grad_norm.json").write_text(json.dumps({"steps": self.rows, "val": self.val}))


def run(seed: int, clip: float, steps: int, folder: Path, extra: list[str]) -> dict:
    run_dir = folder / f"seed{seed}_clip{clip:g}"
    args = ["recipe=maml_nav2d", f"seed={seed}", "threads=1", f"trainer.max_steps={steps}",
            f"trainer.gradient_clip_val={clip}", "test_after_fit=false", "trainer.enable_progress_bar=false",
            f"run_dir={run_dir}", "callbacks=[{name: 'maml_nav2d_clip:GradNorm'}]", *extra]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, "-m", "zoo.train", *args], check=True, cwd=ROOT, env=env,
                   stdout=subprocess.DEVNULL)
    logged = json.loads(next(run_dir.rglob("grad_norm.json")).read_text())
    norms = [r["grad_norm"] for r in logged["steps"]]
    return {"seed": seed, "clip": clip, "extra": extra, "command": "python -m zoo.train " + " ".join(args),
            "val": logged["val"], "steps": logged["steps"], "grad_norm_median": statistics.median(norms),
            "grad_norm_max": max(norms), "share_above_1": sum(n > 1 for n in norms) / len(norms)}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--seeds", default="0,3")
    ap.add_argument("--clips", default="0,1", help="trainer.gradient_clip_val values (0: none)")
    ap.add_argument("--steps", type=int, default=150, help="meta-iterations per run")
    ap.add_argument("--extra", nargs="*", default=[], help="key=value overrides added to every run")
    ap.add_argument("--out", required=True)
    add_device_option(ap)
    args = ap.parse_args()
    device = resolve_device(args.device)
    acc, devices = accelerator(device)
    on = [f"trainer.accelerator={acc}", f"trainer.devices={devices}"]
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in [int(s) for s in args.seeds.split(",")]:
            for clip in [float(c) for c in args.clips.split(",")]:
                r = run(seed, clip, args.steps, Path(tmp), [*on, *args.extra])
                print(f"seed {seed} clip {clip:g} {' '.join(args.extra)}: grad norm median "
                      f"{r['grad_norm_median']:.3g} max {r['grad_norm_max']:.3g}, above 1 on "
                      f"{r['share_above_1']:.0%} of steps; val/return_1 "
                      f"{[round(v['val/return_1'], 1) for v in r['val']]}", flush=True)
                out.append(r)
    Path(args.out).write_text(json.dumps({"command": "python " + " ".join(sys.argv), "device": str(device),
                                          "runs": out}, indent=1))


if __name__ == "__main__":
    main()
