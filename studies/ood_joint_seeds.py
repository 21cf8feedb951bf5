"""The joint OOD recipe's variants against the current recipe and ce, seed by seed (issue 79). Study page:
studies/2026-12-02-ood-joint-seeds.md.

Reads seed records made by ``benchmarks/recipe_seeds.py`` (each run scored by ``zoo.evaluate``) and, where the
run folders are still there, each run's last validation of ``val/made_tnr95`` (max-softmax TNR@TPR95 on OOD kinds
made from the training digits: the validation criterion that uses no test OOD kind). Prints, per record, the
test max-softmax TNR@TPR95 of every seed on each OOD set, paired against the current recipe's record, and the
target of issue 79 item 3: on uniform, gaussian and photos joint >= ce on every seed, uniform spread <= 0.05,
accuracy within 0.5 point of ce.

    python studies/ood_joint_seeds.py --records studies/results/seeds_ood_digits_joint_lrdrop24_cpu.json ...

``--base`` pairs against another record (the final study: the current recipe's); ``--val-ce`` /
``--val-recipe`` give the validation references of that study's rule (V1, V2), from run folders or values
recorded elsewhere (``SEED=acc,uniform,gaussian,photos``); ``--table`` prints one markdown row a record (seeds,
far-OOD pairs >= ce, the worst seed, accuracy).
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


def last_validation(c: dict | None) -> dict[str, float | None]:
    """The last validation (the checkpoint's EMA weights) of a run's curves: accuracy and max-softmax TNR@TPR95 of
    each OOD set (None where the run folder is gone)."""
    last = {s: (c or {}).get(f"val/{s}/msp_tnr95", [None])[-1] for s in (*FAR, *NEAR)}
    return {"acc": c["val/acc"][-1] if c else None, **last}


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
    acc, acc_ce, acc_ref = by_seed(record, "test/acc"), by_seed(ce, "test/acc"), by_seed(base, "test/acc")
    both = [k for k in sorted(acc) if k in acc_ref]
    out["acc"] = {"values": [acc[k] for k in sorted(acc)], "mean": statistics.fmean(acc.values()),
                  "ce_mean": statistics.fmean(acc_ce.values()),
                  "minus_recipe": paired([acc[k] for k in both], [acc_ref[k] for k in both])}
    out["curves"] = {r["seed"]: curves(r) for r in record["runs"]}
    out["val_made_tnr95"] = {k: (c or {}).get("val/made_tnr95", [None])[-1] for k, c in sorted(out["curves"].items())}
    # the last validation (the checkpoint's EMA weights) of each set, per seed: the selection rule's inputs
    out["val_last"] = {k: last_validation(c) for k, c in sorted(out["curves"].items())}
    u = out["sets"]["uniform"]
    out["target"] = {"far_ge_ce_every_seed": all(out["sets"][s]["at_least_ce_on"] == out["sets"][s]["ce_seeds"]
                                                 == out["sets"][s]["n"] for s in FAR),
                     "uniform_sd_le_0.05": u["sd"] is not None and u["sd"] <= 0.05,
                     "acc_within_0.5_point": out["acc"]["mean"] >= out["acc"]["ce_mean"] - 0.005,
                     "five_seeds": u["n"] >= 5}
    return out


VAL_KEYS = ("acc", *FAR)


def val_ref(spec: str, given: list[str]) -> dict[int, dict[str, float]]:
    """{seed: {acc, uniform, gaussian, photos}} of the last validation: from a record's run folders (``spec``,
    may be empty) and from values recorded elsewhere (``SEED=acc,uniform,gaussian,photos``; they win)."""
    out: dict[int, dict[str, float]] = {}
    if spec:
        for run in load(spec)[1]["runs"]:
            c = curves(run)
            if c:
                last = last_validation(c)
                out[run["seed"]] = {k: last[k] for k in VAL_KEYS}
    for g in given:
        seed, _, values = g.partition("=")
        out[int(seed)] = dict(zip(VAL_KEYS, (float(v) for v in values.split(","))))
    return out


def val_rank(val: dict, ce: dict) -> dict:
    """The final study's validation order: far-OOD (set, seed) pairs >= ce's value, the mean of those values, and
    the mean accuracy against ce's, over the seeds both have."""
    seeds = sorted(k for k in val if k in ce and all(val[k].get(s) is not None for s in VAL_KEYS))
    far = [val[k][s] for k in seeds for s in FAR]
    return {"seeds": seeds, "pairs_ge_ce": sum(val[k][s] >= ce[k][s] for k in seeds for s in FAR), "of": len(far),
            "mean": statistics.fmean(far) if far else None,
            "acc_mean": statistics.fmean(val[k]["acc"] for k in seeds) if seeds else None,
            "ce_acc_mean": statistics.fmean(ce[k]["acc"] for k in seeds) if seeds else None}


def final_rule(row: dict, base: dict, ce: dict, recipe_val: dict | None) -> dict:
    """The final study's rule for one variant (studies/2026-12-02-ood-joint-final.md): V1, V2 on validation,
    1-3 on the test split against ce and the current recipe (``base``)."""
    out: dict = {}
    if recipe_val and row.get("validation"):
        v = row["validation"]
        out["V1"] = v["acc_mean"] is not None and v["acc_mean"] >= v["ce_acc_mean"] - 0.005
        out["V2"] = (v["of"] == recipe_val["of"] == 15 and (v["pairs_ge_ce"], v["mean"]) >
                     (recipe_val["pairs_ge_ce"], recipe_val["mean"]))
    sets, n = row["sets"], row["sets"]["uniform"]["n"]
    out["1_accuracy"] = row["acc"]["mean"] >= row["acc"]["ce_mean"] - 0.005
    u = sets["uniform"]
    out["2_uniform"] = u["at_least_ce_on"] == n == 5 and u["sd"] <= 0.05
    ok = True
    for s in ("gaussian", "photos"):
        ref, c = by_seed(base, f"test/{s}/msp/tnr95"), by_seed(ce, f"test/{s}/msp/tnr95")
        ref_count = sum(ref[k] >= c[k] for k in ref)
        mine = sets[s]
        ok = ok and n == 5 and (mine["at_least_ce_on"] > ref_count or
                                (mine["at_least_ce_on"] == ref_count and min(mine["values"]) > min(ref.values())))
    out["3_gaussian_photos"] = ok
    return out


def table_row(row: dict) -> str:
    """Variant | seeds | far-OOD pairs >= ce | worst seed (its mean of uniform, Gaussian, photos) | accuracy."""
    sets = row["sets"]
    by = {s: dict(zip(sets[s]["seeds"], sets[s]["values"])) for s in FAR}
    seeds = sets["uniform"]["seeds"]
    far = {k: statistics.fmean(by[s][k] for s in FAR) for k in seeds if all(k in by[s] for s in FAR)}
    worst = min(far, key=far.get)
    pairs = sum(sets[s]["at_least_ce_on"] for s in FAR)
    of = sum(sets[s]["ce_seeds"] for s in FAR)
    label = row.get("label") or " ".join(row["extra"]) or "recipe"
    seed_text = ",".join(str(k) for k in seeds)
    acc = statistics.fmean(row["acc"]["values"])
    pairs_text = f"{pairs} of {of}" if of else "no ce run on these seeds"
    return (f"| {label} | {seed_text} | {pairs_text} | {far[worst]:.3f} (seed {worst}) | {acc:.4f} |"
            f" `{Path(row['record'].split(' + ')[0]).name}`{' +' if ' + ' in row['record'] else ''} |")


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
    ap.add_argument("--base", default=str(BASE), help="the record each variant is paired with ('minus recipe')")
    ap.add_argument("--val-ce", default="", help="ce's record whose run folders give its last validation values")
    ap.add_argument("--val-ce-given", nargs="*", default=[],
                    help="ce's recorded values: SEED=acc,uniform,gaussian,photos")
    ap.add_argument("--val-recipe", default="", help="the current recipe's record (run folders), for rule V2")
    ap.add_argument("--val-recipe-given", nargs="*", default=[],
                    help="the recipe's recorded values, as --val-ce-given")
    ap.add_argument("--table", action="store_true", help="print one markdown row a record (the final study's table)")
    args = ap.parse_args()
    base, ce = load(args.base)[1], load(args.ce)[1]
    rows = [compare(p, base, ce) for p in args.records]
    ce_val = val_ref(args.val_ce, args.val_ce_given) if args.val_ce or args.val_ce_given else None
    recipe_val = None
    if ce_val:
        if args.val_recipe or args.val_recipe_given:
            recipe_val = val_rank(val_ref(args.val_recipe, args.val_recipe_given), ce_val)
            print(f"validation references: ce {ce_val}\n  the recipe {recipe_val}")
        for r in rows:
            r["validation"] = val_rank({k: v for k, v in r["val_last"].items() if v}, ce_val)
            r["final_rule"] = final_rule(r, base, ce, recipe_val)
    for r in rows:
        print(f"{r['record']}  extra={r['extra']}" + (f"  ({r['label']})" if "label" in r else ""))
        for s, v in r["sets"].items():
            d = v["minus_recipe"]
            se = f"{d['se']:.3f}" if d["se"] is not None else "-"
            diff = f"{d['mean']:+.3f} (s.e. {se})" if d["mean"] is not None else "-"
            print(f"  {s:<9} seeds {v['seeds']}: {' '.join(f'{x:.3f}' for x in v['values'])}  "
                  f"minus recipe {diff}  >= ce on {v['at_least_ce_on']}/{v['ce_seeds']}")
        d = r["acc"]["minus_recipe"]
        if d["se"] is not None:
            print(f"  acc minus recipe {d['mean']:+.4f} (s.e. {d['se']:.4f})")
        print(f"  acc {' '.join(f'{x:.3f}' for x in r['acc']['values'])} (ce mean {r['acc']['ce_mean']:.3f})  "
              f"val/made_tnr95 {r['val_made_tnr95']}")
        for seed, v in r["val_last"].items():
            print(f"  last validation, seed {seed}: " + " ".join(f"{k} {x:.3f}" for k, x in v.items() if x is not None))
        print(f"  target: {r['target']}")
        if "validation" in r:
            print(f"  validation (rule V1, V2): {r['validation']}\n  final rule: {r['final_rule']}")
    if args.table:
        print("| variant | seeds | far-OOD pairs >= ce | worst seed (far-OOD mean) | accuracy | record |")
        print("|---|---|---|---|---|---|")
        for r in rows:
            print(table_row(r))
    if args.figure:
        figure(rows, Path(args.figure))
    out = {"command": " ".join(["python", *sys.argv]), "base": load(args.base)[0], "rows": rows}
    if recipe_val:
        out["validation_recipe"], out["validation_ce"] = recipe_val, ce_val
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
