"""Every estimator on every stochastic node, where the models have learned: each column is a recipe at its own
length, each row an estimator of the registry that fits the node (or a column's own row), at its best step size.

    python benchmarks/estimator_matrix.py --plan                    # the rows of each column, and why a misfit does not
    nice python benchmarks/estimator_matrix.py --run dvae,vae       # train what is missing (one run at a time)
    python benchmarks/estimator_matrix.py --status                  # runs done / planned per column
    python benchmarks/estimator_matrix.py --collect dvae            # part file, figure, table of a column's records
    python benchmarks/estimator_matrix.py --publish                 # estimator_matrix.{json,md} from complete columns
    python benchmarks/estimator_matrix.py --step-times dvae         # ms per estimator step, rows interleaved

A run is a normal ``python -m zoo.train`` run of the column's recipe at its own length, with only what measuring
needs changed (one torch thread, the csv logger, no progress bar, no figures, the gradient-variance probe and a
timer of the validation curve). Each finished run writes a small record,
benchmarks/results/estimator_matrix/<column>/<row>__lr<lr>__seed<seed>.json (the headline test metric, the
validation curve against steps and training seconds, the gradient variance, the command, the wall time, the
failure if any); --run skips the runs whose record exists, so a later session resumes from git. The runs' folders
(--runs, default /work/matrix_runs) are disposable.

Step sizes: the default row (the recipe's own estimator) trains at the recipe's learning rate; every other row
first at seed 0 at the recipe's rate, /3 and x3 (one more step out, /9 or x9, when the best is at an edge), picked
on the last validation value, then seeds 1 and 2 at the recipe's rate and at the pick.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
OUT = RESULTS / "estimator_matrix.json"
RECORDS = RESULTS / "estimator_matrix"  # <column>/<run>.json, one per finished run
SEEDS = (0, 1, 2)
LR_FACTOR = 3.0  # the step-size grid: the recipe's rate times LR_FACTOR ** k
REPEATS = 8  # gradient estimates a variance measurement

# column -> its recipe, metrics, the option its estimator's step size is, its seed record and what measuring
# changes; "rows": the column's own rows beside the registry's (row name -> estimator spec and model options;
# adding a row is one line here).
COLUMNS = {
    "dvae": {"recipe": "dvae_digits", "headline": "test/loss", "val": "val/loss", "higher": False,
             "lr_key": "model.lr", "seed_record": "seeds_dvae_digits_cpu.json", "probe_every": 250,
             "settings": ["model.plot_every_n_epochs=100000"], "rows": {}},
    "vae": {"recipe": "vae_digits", "headline": "test/loss", "val": "val/loss", "higher": False,
            "lr_key": "model.lr", "seed_record": "seeds_vae_digits_cpu.json", "probe_every": 300,
            "settings": ["model.plot_every_n_epochs=100000"],
            "rows": {f"reinforce[{b}]": {"spec": {"name": "reinforce", "baseline": b}}
                     for b in ("ema", "batch_mean", "learned")}},
    "maml_rl": {"recipe": "maml_nav2d", "headline": "test/return_1", "val": "val/return_1", "higher": True,
                "lr_key": "model.lr", "seed_record": "seeds_maml_nav2d_400iterations_cpu.json", "probe_every": 50,
                "settings": [],
                "rows": {f"reinforce[{b}]": {"spec": {"name": "reinforce", "baseline": b}}
                         for b in ("ema", "batch_mean", "learned")}},
    # the step size is the generator's adversarial one (the estimator's gradient feeds it; MLE and D keep theirs)
    "seqgan": {"recipe": "seqgan_oracle_small", "headline": "test/nll_oracle", "val": "val/nll_oracle",
               "higher": False, "lr_key": "model.adv_lr", "seed_record": "seeds_seqgan_oracle_small_cpu.json",
               "probe_every": 500, "settings": [],
               # a group of 4 sequences per start for rloo's leave-one-out baseline, the final D score as every
               # token's reward (no rollouts)
               "rows": {"rloo_group4_norollouts": {"spec": "rloo",
                                                   "settings": ["model.group_size=4", "model.rollouts=0"]}}},
    "sat_hard": {"recipe": "sat_shapes_hard", "headline": "test/bleu4", "val": "val/bleu4", "higher": True,
                 "lr_key": "model.lr", "seed_record": "seeds_sat_shapes_hard_cpu.json", "probe_every": 400,
                 "settings": [], "rows": {}},
}
ORDER = ("dvae", "vae", "maml_rl", "seqgan", "sat_hard")  # the background run's order: cheapest first
# columns left out, and why (the sentence the table prints under it)
DROPPED = {
    "ood_gan": "the OOD GAN's node z ~ N(0, I) has no parameters: G's weights get their gradient by "
               "backpropagation through G(z) whatever the estimator, so every row repeated one gradient to the "
               "last digit (2026-11-28's matrix); it has no column",
}
NOTES = {  # what a reader of a column needs to know
    "maml_rl": "the variance is that of the meta-gradient to the policy (estimator_loss: a fresh meta-loss); the "
               "registry's rloo is the default's gradient (reinforce with a leave-one-out baseline over the "
               "trajectories); reinforce[learned] reads (goal, time)",
    "vae": "one Gaussian node z ~ N(mu(x), sigma(x)); reinforce[learned] reads the image",
    "dvae": "20 categorical variables of 10 classes; one cost (the ELBO) couples them",
    "sat_hard": "relax's control variate is per word (control: auto = per_variable on this sequential node); "
                "expectation and unordered_set need a location's own cost, which here is the rest of the caption",
    "seqgan": "score-function rows draw with G's sampler and reward each token with the paper's 16 rollouts "
              "(relax draws the tokens with its own sample()); rloo_group4_norollouts draws 4 sequences per start "
              "(model.group_size=4: 4x the sequences of a step) and rewards every token with the sequence's final D "
              "score (model.rollouts=0); gumbel_softmax and straight_through backpropagate through D's score of the "
              "(relaxed) sequence; every row's gradient estimates grad E[-D(Y)] / T, so the variances share one "
              "scale; the step size is model.adv_lr (G's adversarial steps)",
}


def node_of(recipe: str):
    """(model class, its StochasticNode, the recipe's model options, the recipe's estimator spec)."""
    from zoo.config import load_config
    from zoo.registry import MODELS as REGISTRY

    cfg = load_config(recipe)
    cls = REGISTRY.entry(cfg["model"]["name"]).obj
    options = {k: v for k, v in cfg["model"].items() if k != "name"}
    node = cls.stochastic_node(cls.Config(**options))
    return cls, node, options, options.get("estimator") or cls.Config().estimator


def rows_for(column: str) -> tuple[dict, dict, str | None]:
    """({row: {"spec", "settings"}} that fit the node, {row: why not} for those that do not, the registry row the
    model's own spec equals, if one does). The model's own spec is the row 'default'. A column's own row with
    model options of its own (its "settings") changes the node, so it is not checked against the recipe's."""
    from zoo.estimators.seam import mismatch, requirements, resolve
    from zoo.registry import ESTIMATORS

    col = COLUMNS[column]
    cls, node, options, default = node_of(col["recipe"])
    d_name, _, d_opts = resolve(default)
    d_cls = ESTIMATORS.get(d_name)
    fits, why, same = {"default": {"spec": default, "settings": []}}, {}, None
    own = {row: {"spec": r["spec"], "settings": r.get("settings", [])} for row, r in col["rows"].items()}
    for name, row in [*((n, {"spec": n, "settings": []}) for n in ESTIMATORS.list()), *own.items()]:
        if row["settings"]:
            fits[name] = row
            continue
        est_name, est_cls, opts = resolve(row["spec"])
        reason = mismatch(requirements(est_name, est_cls, opts), node, node.samples or getattr(opts, "n", None))
        est_cls = ESTIMATORS.get(est_name)
        if reason:
            why[name] = reason
        elif same is None and same_gradient(d_cls, d_opts, est_cls, opts, node):
            same = name
        else:
            fits[name] = row
    return fits, why, same


def same_gradient(a_cls, a_opts, b_cls, b_opts, node) -> bool:
    """Whether two estimator specs give one gradient on ``node``: one class a subclass of the other (rloo is
    reinforce with the leave-one-out baseline) and the same options, n aside where the node states its samples."""
    import dataclasses

    if not (issubclass(a_cls, b_cls) or issubclass(b_cls, a_cls)):
        return False
    if not (dataclasses.is_dataclass(a_opts) and dataclasses.is_dataclass(b_opts)):
        return a_opts == b_opts
    a, b = dataclasses.asdict(a_opts), dataclasses.asdict(b_opts)
    if node.samples:
        a.pop("n", None), b.pop("n", None)
    return a == b


def spec_text(spec) -> str:
    if isinstance(spec, dict):
        return "{" + ", ".join(f"{k}: {v}" for k, v in spec.items()) + "}"
    return str(spec)


# ---------------------------------------------------------------- runs and their records


def recipe_lr(column: str) -> float:
    """The recipe's step size (its lr_key's value)."""
    from zoo.config import load_config

    node = load_config(COLUMNS[column]["recipe"])
    for part in COLUMNS[column]["lr_key"].split("."):
        node = node[part]
    return float(node)


def lr_at(lr0: float, k: int) -> float:
    return float(f"{lr0 * LR_FACTOR ** k:.4g}")


def slug(row: str, k: int, seed: int) -> str:
    """A run's name: its row (brackets as underscores), its step on the lr grid and its seed."""
    return f"{row.replace('[', '_').replace(']', '')}__lr{k:+d}__seed{seed}"


def records_of(folder: Path) -> dict[tuple[str, int, int], dict]:
    """(row, lr step k, seed) -> record of every finished run in a column's folder."""
    out = {}
    for path in sorted(folder.glob("*.json")):
        rec = json.loads(path.read_text())
        out[(rec["row"], rec["lr_step"], rec["seed"])] = rec
    return out


def score(rec: dict | None, higher: bool) -> float:
    """A run's validation score for the step-size pick: its last validation value, larger is better (a failed or
    diverged run scores -inf)."""
    v = rec.get("val_last") if rec else None
    if v is None or not math.isfinite(v):
        return -math.inf
    return v if higher else -v


def lr_pick(recs: dict, row: str, higher: bool) -> tuple[int | None, list[int]]:
    """(the picked lr step k, or None until decidable; the steps still to try at seed 0)."""
    tried = {k for (r, k, s) in recs if r == row and s == 0}
    todo = [k for k in (0, -1, 1) if k not in tried]
    if todo:
        return None, todo
    best = max(sorted(tried, key=abs), key=lambda k: score(recs[(row, k, 0)], higher))
    edge = best == min(tried) or best == max(tried)
    further = best + (1 if best > 0 else -1)
    if best != 0 and edge and abs(best) == 1 and further not in tried:
        return None, [further]
    return best, []


def plan(column: str, recs: dict, rows: list[str], seeds: tuple[int, ...] = SEEDS) -> list[tuple[str, int, int]]:
    """The runs still to do that can be decided now, in order: the default's seeds and every row's step sizes
    at seed 0 first, then the further step sizes, then the other seeds at the recipe's rate and at the pick."""
    higher = COLUMNS[column]["higher"]
    first, second, third = [], [], []
    first += [("default", 0, s) for s in seeds]
    for row in rows:
        if row == "default":
            continue
        pick, todo = lr_pick(recs, row, higher)
        if todo and not all(k in (0, -1, 1) for k in todo):
            second += [(row, k, seeds[0]) for k in todo]
        else:
            first += [(row, k, seeds[0]) for k in todo]
        if pick is not None:
            third += [(row, k, s) for k in sorted({0, pick}) for s in seeds[1:]]
    return [r for r in first + second + third if r not in recs]


def grad_vars(run_dir: Path) -> list[dict]:
    """The run's grad_var measurements (metrics.csv): [{step, grad_var, grad_snr}]."""
    path = run_dir / "logs" / "metrics.csv"
    if not path.is_file():
        return []
    with open(path) as f:
        return [{"step": int(float(r["step"])), "grad_var": float(r["grad_var"]),
                 "grad_snr": float(r["grad_snr"]) if r.get("grad_snr") else None}
                for r in csv.DictReader(f) if r.get("grad_var")]


def run_one(column: str, row: str, spec_settings: dict, k: int, seed: int, runs: Path, extra: list[str],
            folder: Path) -> dict:
    """Train one cell's run and write its record (also when it fails)."""
    from zoo.sweep.runs import Run, execute

    col = COLUMNS[column]
    lr = lr_at(recipe_lr(column), k)
    spec = spec_settings["spec"]
    name = slug(row, k, seed)
    run_folder = runs / column / name
    shutil.rmtree(run_folder, ignore_errors=True)  # a try stopped before its record: start it afresh
    callbacks = (f"callbacks=[{{name: 'matrix_timer:CurveTimer'}}, "
                 f"{{name: grad_variance, every_n_steps: {col['probe_every']}, repeats: {REPEATS}}}]")
    overrides = [f"model.estimator={json.dumps(spec) if isinstance(spec, dict) else spec}", f"{col['lr_key']}={lr}",
                 f"seed={seed}", "threads=1", "logger=[csv]", "trainer.enable_progress_bar=false", callbacks,
                 *col["settings"], *spec_settings["settings"], *extra]
    env = {"PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    result = execute(col["recipe"], Run(label=name, values={}, overrides=overrides, threads=1), run_folder, env=env)
    run_dir = Path(result["run_dir"]) if "run_dir" in result else None
    curve = {}
    if run_dir is not None and (run_dir / "curve.json").is_file():
        curve = json.loads((run_dir / "curve.json").read_text())
    points = [{"step": p["step"], "train_s": p["train_s"], "wall_s": p["wall_s"], "value": p.get(col["val"])}
              for p in curve.get("points", [])]
    gv = grad_vars(run_dir) if run_dir is not None else []
    val_last = points[-1]["value"] if points else None
    record = {"column": column, "recipe": col["recipe"], "row": row, "spec": spec, "settings":
              spec_settings["settings"], "lr_key": col["lr_key"], "lr": lr, "lr_step": k, "seed": seed,
              "headline": col["headline"], "test": result["metrics"].get(col["headline"]),
              "test_metrics": result["metrics"], "val": col["val"], "val_last": val_last, "curve": points,
              "grad_var": statistics.fmean(g["grad_var"] for g in gv) if gv else None, "grad_var_points": gv,
              "train_s": curve.get("train_s"), "batches": curve.get("batches"), "wall_s": result["wall_s"],
              "command": result["command"].replace(str(runs), "<runs>"), "extra": extra,
              "machine": f"{platform.node()}, {platform.machine()}, {platform.python_version()}",
              "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "failure": None if result["rc"] == 0 else {"rc": result["rc"], "error": result.get("error", "")}}
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f"{name}.json.tmp"
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    tmp.replace(folder / f"{name}.json")
    return record


def run_columns(columns: list[str], records: Path, runs: Path, extra: list[str], only: list[str] | None,
                seeds: tuple[int, ...]) -> None:
    """Every column in turn: its missing runs one at a time (the plan is read again after each run, so the step
    size is picked as soon as seed 0's runs are in), then its part file and figure (--collect, a fresh process)."""
    for column in columns:
        fits, _, _ = rows_for(column)
        rows = [r for r in fits if not only or r == "default" or r in only]
        folder = records / column
        while True:
            recs = records_of(folder)
            todo = plan(column, recs, rows, seeds)
            if not todo:
                break
            row, k, seed = todo[0]
            t0 = time.time()
            print(f"{time.strftime('%H:%M:%S')} {column} {row} lr step {k:+d} seed {seed} "
                  f"({len(recs)} done, {len(todo)} decidable left)", flush=True)
            rec = run_one(column, row, fits[row], k, seed, runs, extra, folder)
            print(f"    {rec['headline']} {rec['test']} val {rec['val_last']} in {time.time() - t0:.0f} s"
                  + (f" FAILED {rec['failure']}" if rec["failure"] else ""), flush=True)
        print(f"{time.strftime('%H:%M:%S')} {column}: every run has its record", flush=True)
        subprocess.run([sys.executable, __file__, "--collect", column, "--records", str(records)], check=False)


# ---------------------------------------------------------------- the command line


def main() -> None:
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(HERE))
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--plan", action="store_true", help="print each column's rows (and why a misfit does not fit)")
    ap.add_argument("--run", metavar="COLUMNS", help=f"train the missing runs of these columns ({','.join(ORDER)})")
    ap.add_argument("--status", action="store_true", help="runs done and decidable left, per column")
    ap.add_argument("--collect", metavar="COLUMNS", help="part file, table and figure of these columns' records")
    ap.add_argument("--publish", action="store_true",
                    help="estimator_matrix.{json,md} and the docs' guide from the complete columns' part files")
    ap.add_argument("--step-times", metavar="COLUMNS", help="ms per estimator step of every row, interleaved")
    ap.add_argument("--rows", default="", help="only these rows (and the default), comma-separated")
    ap.add_argument("--seeds", default=",".join(map(str, SEEDS)))
    ap.add_argument("--records", default=str(RECORDS), help="the runs' records (committed)")
    ap.add_argument("--runs", default="/work/matrix_runs", help="the runs' folders (disposable)")
    ap.add_argument("--extra", action="append", default=[],
                    help="an override every run gets (a quick look at a tiny scale; recorded)")
    args = ap.parse_args()
    records, seeds = Path(args.records), tuple(int(s) for s in args.seeds.split(","))
    only = [r for r in args.rows.split(",") if r] or None
    if args.plan:
        for c in ORDER:
            fits, why, same = rows_for(c)
            print(f"{c} ({COLUMNS[c]['recipe']}, {COLUMNS[c]['lr_key']}={recipe_lr(c)}): "
                  + ", ".join(f"{k}={spec_text(v['spec'])}" + (f" {' '.join(v['settings'])}" if v["settings"] else "")
                              for k, v in fits.items()) + (f" (the default is {same})" if same else ""))
            for k, v in why.items():
                print(f"    {k}: cannot fit: {v}")
        return
    if args.status:
        for c in ORDER:
            fits, _, _ = rows_for(c)
            recs = records_of(records / c)
            todo = plan(c, recs, [r for r in fits if not only or r == "default" or r in only], seeds)
            spent = sum(r["wall_s"] for r in recs.values())
            print(f"{c}: {len(recs)} runs recorded ({spent / 60:.0f} min), {len(todo)} decidable left"
                  + (f", next {todo[0]}" if todo else ""))
        return
    if args.run:
        run_columns(args.run.split(","), records, Path(args.runs), args.extra, only, seeds)
        return
    if args.collect:
        for c in args.collect.split(","):
            collect(c, records)
        return
    if args.publish:
        publish(records)
        return
    if args.step_times:
        for c in args.step_times.split(","):
            step_times(c)
        return
    ap.print_help()


if __name__ == "__main__":
    main()
