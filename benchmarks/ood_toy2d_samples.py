"""Where the 2-D toy's generator puts its samples, and how confident the classifier is there
(docs/ood.md's toy table): each recipe trained per seed, then on the 1,000 test points and 1,000
samples of G, the mean max-softmax and the mean distance to the nearer class mean, with the
recipe's box / ring TNR@TPR95 (max-softmax) from ``zoo.evaluate``.

    python benchmarks/ood_toy2d_samples.py --seeds 0 1 2
    # -> benchmarks/results/ood_toy2d_samples.json (~1.5 min a boundary_gan run, 20 s the others)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.common.devices import accelerator, add_device_option, describe, processor, resolve_device  # noqa: E402
from zoo.evaluate import evaluate  # noqa: E402
from zoo.loading import load_any  # noqa: E402
from zoo.models.ood.config import Toy2DConfig  # noqa: E402
from zoo.models.ood.data import toy_points  # noqa: E402
from zoo.spread import spread  # noqa: E402
from zoo.train import train  # noqa: E402

RUNS = {  # label -> recipe and overrides (the docs' three panels)
    "ce": ("ood_toy2d", ["model.mode=ce"]),
    "joint": ("ood_toy2d", []),
    "boundary_gan": ("ood_toy2d_boundary", []),
}


@torch.no_grad()
def placement(model, seed: int, device: torch.device, n: int = 1000) -> dict:
    """Mean max-softmax and mean distance to the nearer class mean, on test points and on G."""
    c = Toy2DConfig()
    means = torch.tensor([[-c.separation, 0.0], [c.separation, 0.0]], device=device)  # (2, 2)
    x, _ = toy_points(n, c.separation, c.std, 2)  # the datamodule's test points
    model = model.to(device).eval()

    def stats(points: torch.Tensor) -> tuple[float, float]:
        msp = torch.softmax(model.classifier(points), 1).max(1).values  # (n,)
        distance = torch.cdist(points, means).min(1).values  # (n,)
        return round(float(msp.mean()), 4), round(float(distance.mean()), 4)

    out = dict(zip(("data_msp", "data_distance"), stats(x.to(device))))
    if hasattr(model, "generator"):
        torch.manual_seed(seed)
        out.update(zip(("G_msp", "G_distance"), stats(model.generate(n))))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add_device_option(ap)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--runs", default=str(ROOT / "runs/bench_ood_toy2d_samples"))
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/ood_toy2d_samples.json"))
    args = ap.parse_args()
    device = resolve_device(args.device)
    acc, devices = accelerator(device)
    torch.set_num_threads(1)  # as the cards and recipe_seeds.py train
    rows = []
    for label, (recipe, extra) in RUNS.items():
        for seed in args.seeds:
            start = time.time()
            run_dir = Path(args.runs) / f"{label}_{seed}"
            result = train([f"recipe={recipe}", f"seed={seed}", f"run_dir={run_dir}", f"trainer.accelerator={acc}",
                            f"trainer.devices={devices}", "trainer.enable_progress_bar=false",
                            "test_after_fit=false", *extra])
            ckpt = str(result.run_dir / "checkpoints" / "last.ckpt")
            metrics = evaluate(ckpt)
            row = {"label": label, "recipe": recipe, "overrides": extra, "seed": seed,
                   **placement(load_any(ckpt)[0], seed, device),
                   "box_msp_tnr95": round(metrics["test/box/msp/tnr95"], 4),
                   "ring_msp_tnr95": round(metrics["test/ring/msp/tnr95"], 4),
                   "wall_s": round(time.time() - start, 1)}
            print(json.dumps(row), flush=True)
            rows.append(row)
    keys = ("data_msp", "data_distance", "G_msp", "G_distance", "box_msp_tnr95", "ring_msp_tnr95")
    summary = {label: {k: spread([r.get(k) for r in rows if r["label"] == label]) for k in keys
                       if any(k in r for r in rows if r["label"] == label)} for label in RUNS}
    record = {"command": "python " + " ".join(sys.argv), "device": str(device), "device_name": describe(device),
              "machine": processor(), "seeds": args.seeds, "runs": rows, "summary": summary}
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    for label, s in summary.items():
        print(label, {k: (round(v["mean"], 3), round(v["min"], 3), round(v["max"], 3)) for k, v in s.items()})


if __name__ == "__main__":
    main()
