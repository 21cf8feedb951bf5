"""ce vs confidence vs joint (Lee et al. 2018) on the same data, several seeds, every OOD set and
every detector: mean and standard deviation of TNR@TPR95, AUROC, AUPR-in/out and detection
accuracy, plus accuracy and ECE before / after temperature scaling.

    python benchmarks/ood_table.py                              # digits, 3 seeds x 3 modes, ~15 min on 2 cores
    python benchmarks/ood_table.py --seeds 0 --modes ce joint   # a quick look
    python benchmarks/ood_table.py --suite svhn --data-root /data      # the paper's SVHN setting (needs the data)
    python benchmarks/ood_table.py --suite cifar10 --data-root /data   # the paper's CIFAR-10 setting
    python benchmarks/ood_table.py --device cuda                       # on a GPU
    python benchmarks/ood_table.py --seeds 0 1 2 3 4 --tag NAME --paired-with benchmarks/results/ood_digits.json
                                                  # a re-run beside the table, paired with it seed by seed

Every run (failures too) is written to benchmarks/results/ood_<suite>_runs/<mode>_seed<k>.json (with
--tag T: ood_<suite>_T_runs/, and ood_<suite>_T.json / .md below) with
the command that made it; the summary to benchmarks/results/ood_<suite>.json and a markdown table
to benchmarks/results/ood_<suite>.md (also printed). A missing dataset or a bad option is no failed
run but one message and exit 2, with nothing written (the SVHN / CIFAR-10 files are not on the
machine these results were made on).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.common.devices import accelerator, add_device_option, describe, resolve_device  # noqa: E402
from benchmarks.common.paths import shown  # noqa: E402
from zoo.spread import paired  # noqa: E402

SUITES = {  # suite -> mode -> recipe
    "digits": {"ce": "ood_digits_ce", "confidence": "ood_digits_confidence", "joint": "ood_digits_joint"},
    "svhn": {"ce": "ood_svhn_ce", "joint": "ood_svhn_joint"},
    "cifar10": {"ce": "ood_cifar10_ce", "joint": "ood_cifar10_joint"},
}
DETECTION = ("tnr95", "auroc", "aupr_in", "aupr_out", "det_acc")


def run_one(recipe: str, seed: int, args) -> dict:
    from zoo.errors import UserError
    from zoo.train import train

    overrides = [f"recipe={recipe}", f"seed={seed}", f"run_dir={args.run_dir}", "trainer.enable_progress_bar=false",
                 *args.overrides]
    if args.data_root:
        overrides.append(f"data.root={args.data_root}")
    acc, devices = accelerator(args.device)
    overrides += [f"trainer.accelerator={acc}", f"trainer.devices={devices}".replace(" ", "")]
    named = f"run_dir={shown(args.run_dir)}"  # the record names no folder of this machine
    command = "python -m zoo.train " + " ".join(named if o.startswith("run_dir=") else o for o in overrides)
    record = {"recipe": recipe, "seed": seed, "command": command, "status": "ok"}
    t0 = time.time()
    try:
        result = train(overrides)
        record["metrics"] = {k: float(v) for k, v in result.test_metrics.items()}
        record["run_dir"] = shown(result.run_dir)
    except UserError:  # missing data, a bad option: every run would fail the same way; stop (exit 2)
        raise
    except Exception as err:  # a failed run is on record too
        record.update(status="failed", error=f"{type(err).__name__}: {err}", traceback=traceback.format_exc())
    record["seconds"] = round(time.time() - t0, 1)
    return record


def summarise(records: dict[str, list[dict]]) -> dict:
    """mode -> metric -> (mean, std, n) over the successful seeds."""
    out = {}
    for mode, runs in records.items():
        ok = [r["metrics"] for r in runs if r["status"] == "ok"]
        keys = sorted({k for m in ok for k in m})
        out[mode] = {}
        for k in keys:
            vals = [m[k] for m in ok if k in m]
            out[mode][k] = {"mean": statistics.fmean(vals), "std": statistics.stdev(vals) if len(vals) > 1 else 0.0,
                            "n": len(vals)}
    return out


def pair(records: dict[str, list[dict]], other: dict) -> dict:
    """mode -> metric -> this run minus ``other``'s (an earlier result JSON), seed by seed over the seeds both
    ran (zoo.spread.paired: the differences, their mean and its standard error)."""
    out = {}
    for mode, runs in records.items():
        mine = {r["seed"]: r["metrics"] for r in runs if r["status"] == "ok"}
        theirs = {r["seed"]: r["metrics"] for r in other.get("runs", {}).get(mode, []) if r["status"] == "ok"}
        seeds = sorted(set(mine) & set(theirs))
        if not seeds:
            continue
        keys = sorted(set(mine[seeds[0]]) & set(theirs[seeds[0]]))
        out[mode] = {"seeds": seeds, "metrics": {k: paired([mine[s][k] for s in seeds], [theirs[s][k] for s in seeds])
                                                 for k in keys}}
    return out


def markdown(summary: dict, detectors: list[str]) -> str:
    modes = list(summary)
    fmt = lambda s: f"{100 * s['mean']:.1f} ± {100 * s['std']:.1f}" if s else "—"  # noqa: E731
    lines = ["| metric (test, %, mean ± std over seeds) | " + " | ".join(modes) + " |",
             "|---|" + "---|" * len(modes)]
    for k in ("acc", "ece", "ece_ts"):
        lines.append(f"| {k} | " + " | ".join(fmt(summary[m].get(f"test/{k}")) for m in modes) + " |")
    sets = sorted({k.split("/")[1] for m in modes for k in summary[m] if k.count("/") == 3})
    for det in detectors:
        for s in sets:
            for metric in DETECTION:
                key = f"test/{s}/{det}/{metric}"
                if any(key in summary[m] for m in modes):
                    cells = " | ".join(fmt(summary[m].get(key)) for m in modes)
                    lines.append(f"| {s} · {det} · {metric} | {cells} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--suite", default="digits", choices=list(SUITES))
    p.add_argument("--modes", nargs="+", default=None, help="subset of the suite's modes")
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--data-root", default="", help="data.root for the real-data suites")
    p.add_argument("--run-dir", default=str(ROOT / "runs" / "ood_table"))
    p.add_argument("--tag", default="", help="write ood_<suite>_TAG.json / .md / _runs/ (a re-run beside the "
                   "current table, never over it)")
    p.add_argument("--paired-with", default="", help="an earlier result JSON (benchmarks/results/ood_digits.json, "
                   "say): also record each metric's paired difference to its runs, seed by seed")
    p.add_argument("--detectors", nargs="+", default=["msp", "odin", "energy", "mahalanobis"])
    p.add_argument("overrides", nargs="*", help="extra key=value overrides for every run")
    add_device_option(p)
    args = p.parse_args()
    args.device = resolve_device(args.device)
    import torch

    from zoo.errors import UserError

    torch.set_num_threads(1)
    suite = SUITES[args.suite]
    modes = args.modes or list(suite)
    out_dir = ROOT / "benchmarks" / "results"
    name = f"ood_{args.suite}" + (f"_{args.tag}" if args.tag else "")
    runs_dir = out_dir / f"{name}_runs"
    records: dict[str, list[dict]] = {}
    for mode in modes:
        for seed in args.seeds:
            try:
                rec = run_one(suite[mode], seed, args)
            except UserError as err:
                hint = ("" if args.suite == "digits" else f" (the {args.suite} suite needs the dataset's files under "
                        "--data-root; layouts in docs/ood.md)")
                print(f"error: {suite[mode]}: {err}{hint}", file=sys.stderr)
                sys.exit(2)
            rec["mode"] = mode
            runs_dir.mkdir(parents=True, exist_ok=True)
            (runs_dir / f"{mode}_seed{seed}.json").write_text(json.dumps(rec, indent=1) + "\n")
            records.setdefault(mode, []).append(rec)
            print(f"{mode} seed {seed}: {rec['status']} in {rec['seconds']} s", flush=True)
    summary = summarise(records)
    table = markdown(summary, args.detectors)
    result = {"suite": args.suite, "modes": modes, "seeds": args.seeds, "recipes": {m: suite[m] for m in modes},
              "command": "python benchmarks/ood_table.py " + " ".join(sys.argv[1:]),
              "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}, torch threads 1, shared load",
              "device": str(args.device), "device_name": describe(args.device),
              "summary": summary, "runs": {m: [r for r in rs] for m, rs in records.items()}}
    if args.paired_with:
        other = Path(args.paired_with)
        result["paired_with"] = {"file": other.name, "what": "this run minus that file's, seed by seed",
                                 "modes": pair(records, json.loads(other.read_text()))}
    if len(modes) == len(suite) and len(args.seeds) >= 3:
        (out_dir / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n")
        (out_dir / f"{name}.md").write_text(table + "\n")
    else:  # partial runs never overwrite the full table
        (out_dir / f"{name}_partial.json").write_text(json.dumps(result, indent=1) + "\n")
    print(table)


if __name__ == "__main__":
    main()
