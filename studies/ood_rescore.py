"""Score the runs of existing OOD seed records on OOD sets the datamodule gained after they were made (issue 79:
``blends``, ``letters``): each run's last.ckpt, where its run folder still exists, through ``zoo.evaluate`` (as
``benchmarks/recipe_seeds.py`` scores, one torch thread). Only the metrics a run lacks are added; the values it
has are checked to match to 1e-4 and kept; the record's ``rescored`` field names what was added, by which command.

    python studies/ood_rescore.py studies/results/seeds_ood_digits_joint_lrdrop24_cpu.json ...
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.common.devices import add_device_option  # noqa: E402


def checkpoint(run: dict) -> Path | None:
    """The run's last.ckpt under the run_dir its arguments name (a sweep's seed folder), None when gone."""
    args = run["args"] if isinstance(run["args"], str) else " ".join(run["args"])
    folder = next((a.split("=", 1)[1] for a in args.split() if a.startswith("run_dir=")), None)
    found = sorted(Path(folder).glob("*/*/checkpoints/last.ckpt")) if folder else []
    return found[-1] if found else None


def rescore(path: Path, command: str, device: str) -> list[str]:
    """Adds the missing metrics to every run of the record at ``path`` whose checkpoint exists, scored on
    ``device``; returns the added metric names."""
    import torch

    from benchmarks.common.devices import accelerator, resolve_device
    from zoo.evaluate import evaluate

    torch.set_num_threads(1)
    acc, devices = accelerator(resolve_device(device))
    record = json.loads(path.read_text())
    added: dict[str, None] = {}
    for run in record["runs"]:
        ckpt = checkpoint(run) if run.get("rc") == 0 else None
        if ckpt is None:
            continue
        metrics = evaluate(str(ckpt), {"trainer.accelerator": acc, "trainer.devices": devices})
        for k, v in run["metrics"].items():
            if abs(metrics[k] - v) > 1e-4:
                raise SystemExit(f"{path.name} seed {run['seed']}: {k} is {metrics[k]} now, {v} in the record")
        for k, v in metrics.items():
            if k not in run["metrics"]:
                run["metrics"][k] = v
                added[k] = None
    if added:
        record["rescored"] = {"command": command, "device": str(device), "added": list(added),
                              "seeds": [r["seed"] for r in record["runs"] if set(added) <= set(r["metrics"])]}
        path.write_text(json.dumps(record, indent=1) + "\n")
    return list(added)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("records", nargs="+", help="seed records (JSON) written by benchmarks/recipe_seeds.py")
    add_device_option(ap)
    args = ap.parse_args()
    command = " ".join(["python", "studies/ood_rescore.py", *sys.argv[1:]])
    for p in args.records:
        added = rescore(Path(p), command, args.device)
        print(p, f"added {len(added)} metrics" if added else "nothing to add (or no run folder left)")


if __name__ == "__main__":
    main()
