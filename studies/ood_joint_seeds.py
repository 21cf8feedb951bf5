"""The joint OOD recipe's variants against the current recipe and ce, seed by seed (issue 79). Study page:
studies/2026-12-02-ood-joint-seeds.md.

Reads seed records made by ``benchmarks/recipe_seeds.py`` (each run scored by ``zoo.evaluate``) and, where the
run folders are still there, each run's last validation of ``val/made_tnr95`` (max-softmax TNR@TPR95 on OOD kinds
made from the training digits: the validation criterion that uses no test OOD kind). Prints, per record, the
test max-softmax TNR@TPR95 of every seed on each OOD set, paired against the current recipe's record, and the
target of issue 79 item 3: on uniform, gaussian and photos joint >= ce on every seed, uniform spread <= 0.05,
accuracy within 0.5 point of ce.

    python studies/ood_joint_seeds.py --records studies/results/seeds_ood_digits_joint_lrdrop24_cpu.json ...
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from zoo.spread import paired  # noqa: E402

BASE = ROOT / "studies" / "results" / "seeds_ood_digits_joint_before_replay_cpu.json"  # before the replay, seeds 0-4
CE = ROOT / "benchmarks" / "results" / "seeds_ood_digits_ce_cpu.json"
FAR, NEAR = ("uniform", "gaussian", "photos"), ("rot90", "blends", "letters")
OUT = ROOT / "studies" / "results" / "2026-12-02-ood_joint_seeds.json"


def by_seed(record: dict, key: str) -> dict[int, float]:
    return {r["seed"]: r["metrics"][key] for r in record["runs"] if r.get("rc") == 0 and key in r.get("metrics", {})}


CURVE_KEYS = ("val/acc", "val/msp_tnr95", "val/uniform/msp_tnr95", "val/gaussian/msp_tnr95", "val/photos/msp_tnr95",
              "val/rot90/msp_tnr95", "val/blends/msp_tnr95", "val/letters/msp_tnr95", "val/made_tnr95", "gan/d_real",
              "gan/d_fake", "gan/kl_g", "gan/msp_g",
              "gan/msp_in", "gan/msp_permuted", "gan/msp_blurred", "gan/msp_inverted")


def curves(run: dict) -> dict[str, list] | None:
    """The run's validated epochs: {key: [value per epoch]} of CURVE_KEYS, from its run folder's metrics.csv
    (None when the folder is gone)."""
    args = run["args"] if isinstance(run["args"], str) else " ".join(run["args"])
    folder = next((a.split("=", 1)[1] for a in args.split() if a.startswith("run_dir=")), None)
    files = sorted(Path(folder).glob("*/*/logs/metrics.csv")) if folder else []
    if not files:
        return None
    with open(files[-1], newline="") as f:
        rows = [r for r in csv.DictReader(f) if r.get("val/acc")]
    return {k: [float(r[k]) if r.get(k) else None for r in rows] for k in ("epoch", *CURVE_KEYS)}


def load(spec: str) -> tuple[str, dict]:
    """A record, or several joined by '+' (one variant's seeds from several sweeps): their runs together."""
    paths = [Path(p).resolve() for p in spec.split("+")]
    records = [json.loads(p.read_text()) for p in paths]
    record = dict(records[0], runs=[r for rec in records for r in rec["runs"]],
                  command=" ; ".join(rec["command"] for rec in records))
    return " + ".join(str(p.relative_to(ROOT)) for p in paths), record


def compare(spec: str, base: dict, ce: dict) -> dict:
    """``spec``: a record (``load``), or LABEL=record to name a variant its --extra does not (a recipe edited)."""
    label, _, spec = spec.rpartition("=") if "=" in spec.split("/", 1)[0] else ("", "", spec)
    name, record = load(spec)
    out = {"record": name, "extra": record["extra"], "command": record["command"], "sets": {}}
    if label:
        out["label"] = label
    for s in (*FAR, *NEAR):
        key = f"test/{s}/msp/tnr95"
        mine, ref, c = by_seed(record, key), by_seed(base, key), by_seed(ce, key)
        if not mine:  # a set the record's runs were not scored on (blends, letters: studies/ood_rescore.py)
            continue
        seeds = sorted(mine)
        both = [k for k in seeds if k in ref]
        out["sets"][s] = {"seeds": seeds, "values": [mine[k] for k in seeds],
                          "mean": statistics.fmean(mine.values()),
                          "sd": statistics.stdev(mine.values()) if len(mine) > 1 else None,
                          "minus_recipe": paired([mine[k] for k in both], [ref[k] for k in both]),
                          "at_least_ce_on": sum(mine[k] >= c[k] for k in seeds if k in c),
                          "ce_seeds": sum(k in c for k in seeds), "n": len(seeds)}
    acc, acc_ce = by_seed(record, "test/acc"), by_seed(ce, "test/acc")
    out["acc"] = {"values": [acc[k] for k in sorted(acc)], "mean": statistics.fmean(acc.values()),
                  "ce_mean": statistics.fmean(acc_ce.values())}
    out["curves"] = {r["seed"]: curves(r) for r in record["runs"]}
    out["val_made_tnr95"] = {k: (c or {}).get("val/made_tnr95", [None])[-1] for k, c in sorted(out["curves"].items())}
    # the last validation (the checkpoint's EMA weights) of each set, per seed: the selection rule's inputs
    out["val_last"] = {k: {s: (c or {}).get(f"val/{s}/msp_tnr95", [None])[-1] for s in ("acc", *FAR, *NEAR)}
                       for k, c in sorted(out["curves"].items())}
    for k, c in out["curves"].items():
        if c:
            out["val_last"][k]["acc"] = c["val/acc"][-1]
    u = out["sets"]["uniform"]
    out["target"] = {"far_ge_ce_every_seed": all(out["sets"][s]["at_least_ce_on"] == out["sets"][s]["ce_seeds"]
                                                 == out["sets"][s]["n"] for s in FAR),
                     "uniform_sd_le_0.05": u["sd"] is not None and u["sd"] <= 0.05,
                     "acc_within_0.5_point": out["acc"]["mean"] >= out["acc"]["ce_mean"] - 0.005,
                     "five_seeds": u["n"] >= 5}
    return out


def figure(rows: list[dict], path: Path) -> None:
    """Validation max-softmax TNR@TPR95 on uniform and Gaussian noise and on the made kinds by epoch, a line per
    run (solid: seed 4, dashed: seed 3, dotted: the others), the legend below."""
    from matplotlib.figure import Figure

    panels = (("val/uniform/msp_tnr95", "validation uniform noise (a test kind)"),
              ("val/gaussian/msp_tnr95", "validation Gaussian noise (a test kind)"),
              ("val/made_tnr95", "validation made kinds (permuted, blurred, inverted)"))
    fig = Figure(figsize=(14, 5.2))
    axes = fig.subplots(1, len(panels), sharey=True)
    for i, r in enumerate(rows):
        label = r.get("label") or " ".join(r["extra"]) or "recipe"
        for seed, c in sorted(r["curves"].items()):
            if not c:
                continue
            style = dict(color=f"C{i}", ls="-" if seed == 4 else "--" if seed == 3 else ":", lw=1.2)
            for ax, (key, _) in zip(axes, panels):
                points = [(e, v) for e, v in zip(c["epoch"], c[key]) if v is not None]
                if points:
                    ax.plot(*zip(*points), label=f"{label}, seed {seed}" if ax is axes[0] else None, **style)
    for ax, (_, title) in zip(axes, panels):
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("epoch (0-based)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("max-softmax TNR@TPR95 (EMA weights)")
    fig.legend(loc="lower center", ncol=3, fontsize=7, frameon=False)
    fig.subplots_adjust(bottom=0.36, wspace=0.08)
    fig.savefig(path, dpi=80)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--records", nargs="+", required=True,
                    help="seed records (JSON) of the variants; A.json+B.json: one variant's seeds from two records; "
                         "LABEL=A.json: the variant's name in the figure (default: its --extra, else 'recipe')")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--ce", default=str(CE), help="the ce record the target compares with")
    ap.add_argument("--figure", default="", help="also draw the validation curves of every run into this PNG")
    args = ap.parse_args()
    base, ce = json.loads(BASE.read_text()), load(args.ce)[1]
    rows = [compare(p, base, ce) for p in args.records]
    for r in rows:
        print(f"{r['record']}  extra={r['extra']}" + (f"  ({r['label']})" if "label" in r else ""))
        for s, v in r["sets"].items():
            d = v["minus_recipe"]
            se = f"{d['se']:.3f}" if d["se"] is not None else "-"
            diff = f"{d['mean']:+.3f} (s.e. {se})" if d["mean"] is not None else "-"
            print(f"  {s:<9} seeds {v['seeds']}: {' '.join(f'{x:.3f}' for x in v['values'])}  "
                  f"minus recipe {diff}  >= ce on {v['at_least_ce_on']}/{v['ce_seeds']}")
        print(f"  acc {' '.join(f'{x:.3f}' for x in r['acc']['values'])} (ce mean {r['acc']['ce_mean']:.3f})  "
              f"val/made_tnr95 {r['val_made_tnr95']}")
        for seed, v in r["val_last"].items():
            print(f"  last validation, seed {seed}: " + " ".join(f"{k} {x:.3f}" for k, x in v.items() if x is not None))
        print(f"  target: {r['target']}")
    if args.figure:
        figure(rows, Path(args.figure))
    Path(args.out).write_text(json.dumps({"command": " ".join(["python", *sys.argv]), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
