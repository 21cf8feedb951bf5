"""ODIN under the OOD protocol of OpenOOD v1.5 (Zhang et al. 2023, "OpenOOD v1.5: Enhanced Benchmark for
Out-of-Distribution Detection"): a detector's hyperparameters are tuned on validation OOD data of kinds
*disjoint* from the kinds tested, and near-OOD and far-OOD are reported apart.

    OMP_NUM_THREADS=1 python benchmarks/ood_protocol.py                       # the joint recipe's seeds 0-4
    OMP_NUM_THREADS=1 python benchmarks/ood_protocol.py --models ood-digits-ce ood-digits-joint

For each model (a checkpoint or a pretrained name) every (T, eps) of its ODIN grid scores the validation
split, the validation OOD sets, the test split and the test OOD sets. Two tunings pick (T, eps) for a tested
kind K, by mean validation TNR@TPR95 (ties: AUROC):

- ``tested``: on the validation sets of all kinds, K included (what training does, ``docs/ood.md``: the
  ODIN paper's protocol; validation and test images never overlap, but the kinds do);
- ``disjoint``: on the validation sets of the other kinds only (leave one kind out), as OpenOOD v1.5
  tunes on an OOD set apart from the test sets.

Test TNR@TPR95 and AUROC of K follow, for ODIN with each tuning and for max-softmax (nothing to tune);
near-OOD (rot90) and far-OOD (photos, uniform, gaussian: their mean) are reported apart, mean and sd over
the models. Writes ``benchmarks/results/ood_protocol.json`` (``--out``) and prints the table of docs/ood.md.
"""

from __future__ import annotations

import argparse
import glob
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's zoo and helpers, not an installed zoo
from benchmarks.common.devices import add_device_option, describe, resolve_device

ROOT = Path(__file__).resolve().parent.parent
NEAR, FAR = ("rot90",), ("photos", "uniform", "gaussian")  # docs/ood.md, ### Data
DEFAULT = "runs/bench_recipe_seeds/sweeps/ood_digits_joint/seed=*/ood_digits_joint/*/checkpoints/last.ckpt"


def scores(model, x: torch.Tensor, T: float | None, eps: float) -> torch.Tensor:
    """In-distribution scores (B,): max-softmax (T None) or ODIN at (T, eps), in batches of 512."""
    from zoo.models.ood import detect

    out = []
    for i in range(0, len(x), 512):
        b = x[i:i + 512]
        if T is None:
            with torch.no_grad():
                out.append(detect.msp_score(model.classifier(b)))
        else:
            out.append(detect.odin_score(model.classifier, b, T, eps))
    return torch.cat(out)


def score_model(target: str, device: torch.device) -> dict:
    """{split: {set: {setting: scores}}} for split val / test, set "in" or an OOD kind, setting msp or T_eps."""
    import zoo
    from zoo.models.ood.data import as_float
    from zoo.registry import DATAMODULES
    from zoo.schema import validate

    model = zoo.load(target, device=str(device))
    data = dict(model.run_info["data"])
    entry = DATAMODULES.entry(data.pop("name"))
    dm = entry.obj(validate(entry.config, data, "data") if entry.config else data)
    dm.prepare_data()
    dm.setup("test")
    p = dm.parts
    sets = {"val": {"in": p["val"][0], **p["val_ood"]}, "test": {"in": p["test"][0], **p["test_ood"]}}
    grid = [(float(T), float(e)) for T in model.cfg.odin_temperatures for e in model.cfg.odin_eps]
    out = {}
    for split, named in sets.items():
        out[split] = {}
        for name, x in named.items():
            x = as_float(x).to(model.device, model.dtype)
            out[split][name] = {"msp": scores(model, x, None, 0.0),
                                **{f"{T}_{e}": scores(model, x, T, e) for T, e in grid}}
    return {"grid": grid, "scores": out, "seed": model.run_info.get("card", {}).get("seed")}


def evaluate(scored: dict) -> dict:
    """Per tested kind: the (T, eps) of each tuning and the test metrics of msp and ODIN under each."""
    from zoo.models.ood import detect

    val, test, grid = scored["scores"]["val"], scored["scores"]["test"], scored["grid"]
    kinds = [k for k in test if k != "in"]

    def tune(on: list[str]) -> str:
        best = None
        for T, e in grid:
            key = f"{T}_{e}"
            m = [detect.detection_metrics(val["in"][key], val[k][key]) for k in on]
            rank = (statistics.mean(r["tnr95"] for r in m), statistics.mean(r["auroc"] for r in m))
            if best is None or rank > best[0]:
                best = (rank, key)
        return best[1]

    rows = {}
    for k in kinds:
        picked = {"tested": tune(kinds), "disjoint": tune([o for o in kinds if o != k])}
        row = {"msp": detect.detection_metrics(test["in"]["msp"], test[k]["msp"])}
        for tuning, key in picked.items():
            row[f"odin_{tuning}"] = {**detect.detection_metrics(test["in"][key], test[k][key]), "T_eps": key}
        rows[k] = row
    return rows


def summarise(per_model: list[dict]) -> dict:
    """Mean and sd over the models of each detector's TNR@TPR95 and AUROC, per kind and for near / far."""
    out = {}
    detectors = ["msp", "odin_tested", "odin_disjoint"]
    groups = {**{k: (k,) for k in per_model[0]}, "near": NEAR, "far": FAR}
    for group, kinds in groups.items():
        out[group] = {}
        for d in detectors:
            for metric in ("tnr95", "auroc"):
                values = [statistics.mean(rows[k][d][metric] for k in kinds) for rows in per_model]
                out[group][f"{d}/{metric}"] = {"mean": statistics.mean(values),
                                               "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
                                               "values": values}
    return out


def table(summary: dict, n: int) -> str:
    def cell(group: str, key: str) -> str:
        s = summary[group][key]
        return f"{100 * s['mean']:.1f} ± {100 * s['sd']:.1f}"

    lines = [f"| TNR@TPR95 / AUROC, % (mean ± sd over {n} models) | max-softmax | ODIN tuned on the tested kinds | "
             "ODIN tuned on other kinds (OpenOOD v1.5) |", "|---|---|---|---|"]
    for group, label in [("near", "near-OOD (rot90)"), ("far", "far-OOD (photos, uniform, gaussian)"),
                         ("photos", "photos"), ("uniform", "uniform"), ("gaussian", "gaussian")]:
        cells = [f"{cell(group, d + '/tnr95')} / {cell(group, d + '/auroc')}"
                 for d in ("msp", "odin_tested", "odin_disjoint")]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--models", nargs="*", default=None, help=f"checkpoints or pretrained names (default: {DEFAULT})")
    ap.add_argument("--out", default="benchmarks/results/ood_protocol.json")
    add_device_option(ap)
    args = ap.parse_args()
    device = resolve_device(args.device)
    torch.set_num_threads(1)
    models = args.models or sorted(glob.glob(str(ROOT / DEFAULT)))
    if not models:
        sys.exit("no models: train the seeds first (python benchmarks/recipe_seeds.py --recipes ood_digits_joint "
                 "--seeds 0,1,2,3,4) or pass --models")
    start, per_model = time.time(), []
    for target in models:
        per_model.append(evaluate(score_model(target, device)))
        print(target, json.dumps({k: {d: round(v[d]["tnr95"], 3) for d in v} for k, v in per_model[-1].items()}))
    summary = summarise(per_model)
    shown = [str(Path(m).relative_to(ROOT)) if Path(m).is_absolute() else m for m in models]
    record = {"command": " ".join(["OMP_NUM_THREADS=1 python benchmarks/ood_protocol.py", *sys.argv[1:]]),
              "device": str(device), "device_name": describe(device), "models": shown, "near": list(NEAR),
              "far": list(FAR), "total_s": round(time.time() - start, 1),
              "per_model": per_model, "summary": summary, "table": table(summary, len(models))}
    out = ROOT / args.out
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(record["table"])
    print("wrote", args.out)


if __name__ == "__main__":
    main()
