"""Every estimator on every stochastic node, where the models have learned: each column is a recipe at its own
length, each row an estimator of the registry that fits the node (or a column's own row), at its best step size.

    python benchmarks/estimator_matrix.py --plan                    # the rows of each column, and why a misfit does not
    nice python benchmarks/estimator_matrix.py --run dvae,vae       # train what is missing (one run at a time;
                                                                    # start it once per core: they share the runs)
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
on the last validation value, then seeds 1 and 2 at the recipe's rate and at the pick, and seeds 3 and 4 (the row's
and the default's) where the paired difference is borderline (1-3 standard errors).
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
MORE_SEEDS = (3, 4)  # a cell whose paired difference lies between 1 and 3 standard errors after SEEDS gets these
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
                "lr_key": "model.lr", "seed_record": "seeds_maml_nav2d_5seeds_cpu.json", "probe_every": 50,
                "settings": [],
                "rows": {f"reinforce[{b}]": {"spec": {"name": "reinforce", "baseline": b}}
                         for b in ("ema", "batch_mean", "learned")}},
    # the step size is the generator's adversarial one (the estimator's gradient feeds it; MLE and D keep theirs);
    # a probe of 8 estimates with 16 rollouts a token costs ~35 s, so one per 1,000 of the run's ~6,700 steps
    "seqgan": {"recipe": "seqgan_oracle_small", "headline": "test/nll_oracle", "val": "val/nll_oracle",
               "higher": False, "lr_key": "model.adv_lr", "seed_record": "seeds_seqgan_oracle_small_cpu.json",
               "probe_every": 1000, "settings": [],
               "start": ("test/nll_oracle_mle", "the MLE-pretrained G's"),  # where the adversarial phase begins
               # a group of 4 sequences per start for rloo's leave-one-out baseline, the final D score as every
               # token's reward (no rollouts)
               "rows": {f"{name}_group4_norollouts": {"spec": name,
                                                      "settings": ["model.group_size=4", "model.rollouts=0"]}
                        for name in ("rloo", "grpo", "dr_grpo")}},
    "sat_hard": {"recipe": "sat_shapes_hard", "headline": "test/bleu4", "val": "val/bleu4", "higher": True,
                 "lr_key": "model.lr", "seed_record": "seeds_sat_shapes_hard_cpu.json", "probe_every": 400,
                 "settings": [],
                 # the registry's gumbel_softmax keeps tau at 1; annealed to 0.5 it is docs/captioning.md's row
                 "rows": {"gumbel_softmax[annealed]": {"spec": {"name": "gumbel_softmax", "tau": 1.0, "tau_min": 0.5,
                                                                "anneal_rate": 0.002}}}},
}
ORDER = ("dvae", "vae", "maml_rl", "seqgan", "sat_hard")  # the background run's order: cheapest first
# columns left out, and why (the sentence the table prints under it)
DROPPED = {
    "ood_gan": "the OOD GAN's node z ~ N(0, I) has no parameters: G's weights get their gradient by "
               "backpropagation through G(z) whatever the estimator, so every row repeated one gradient to the "
               "last digit (2026-11-28's matrix); it has no column",
}
CAVEATS = {  # column -> what a reader must know before its numbers: first in its table's note and guide bullet
    "maml_rl": "The recipe collapses on some seeds (returns of -3,400 to -6,900 for good; the default on seed 3; "
               "docs/maml.md says why), so every row's mean carries its collapsed seeds and a row is better or "
               "worse only where it holds on most seeds.",
}
NOTES = {  # what a reader of a column needs to know
    "maml_rl": "the variance is that of the meta-gradient to the policy (estimator_loss: a fresh meta-loss); the "
               "registry's rloo is the default's gradient (reinforce with a leave-one-out baseline over the "
               "trajectories); reinforce[learned] reads (goal, time)",
    "vae": "one Gaussian node z ~ N(mu(x), sigma(x)); reinforce[learned] reads the image",
    "dvae": "20 categorical variables of 10 classes; one cost (the ELBO) couples them",
    "sat_hard": "relax's control variate is per word (control: auto = per_variable on this sequential node); "
                "expectation and unordered_set need a location's own cost, which here is the rest of the caption; "
                "gumbel_softmax keeps the registry's constant tau = 1, gumbel_softmax[annealed] anneals it to 0.5 "
                "(tau_min 0.5, anneal_rate 0.002: docs/captioning.md's setting)",
    "seqgan": "score-function rows draw with G's sampler and reward each token with the paper's 16 rollouts "
              "(relax draws the tokens with its own sample()); the *_group4_norollouts rows (rloo, grpo, "
              "dr_grpo) draw 4 sequences per start (model.group_size=4: 4x the sequences of a step) and reward "
              "every token with the sequence's final D score (model.rollouts=0); gumbel_softmax and "
              "straight_through backpropagate through D's score of the (relaxed) sequence; every row's gradient "
              "estimates grad E[-D(Y)] / T, so the variances share one "
              "scale; the step size is model.adv_lr (G's adversarial steps)",
}


def node_of(recipe: str):
    """(model class, its StochasticNode, the recipe's model options, the recipe's estimator spec)."""
    from zoo.config import known_data_info, load_config
    from zoo.registry import MODELS as REGISTRY

    run = load_config(recipe)
    cls = REGISTRY.entry(run["model"]["name"]).obj
    options = {k: v for k, v in run["model"].items() if k != "name"}
    node = cls.stochastic_node(cls.Config(**options), known_data_info(run["data"]["name"], run.data_options))  # the
    # data's sizes its options state (the oracle's vocabulary), as the recipe check reads them
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
        est_name, _, opts = resolve(row["spec"])
        reason = mismatch(requirements(est_name, opts), node, node.samples or getattr(opts, "n", None))
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
    v = rec.get("val_last") if rec and not rec.get("failure") else None
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
    at seed 0 first, then the further step sizes, then the other seeds at the recipe's rate and at the pick,
    then MORE_SEEDS (row and default) where a paired difference is borderline."""
    higher = COLUMNS[column]["higher"]
    first, second, third, fourth = [], [], [], []
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
            for k in sorted({0, pick}):
                if borderline(recs, row, k, seeds):
                    fourth += [("default", 0, s) for s in MORE_SEEDS] + [(row, k, s) for s in MORE_SEEDS]
    return list(dict.fromkeys(r for r in first + second + third + fourth if r not in recs))


def test_of(rec: dict | None) -> float | None:
    """A run's test value, None for a run not made or failed."""
    return rec["test"] if rec and not rec.get("failure") else None


def paired_by_seed(recs: dict, row: str, k: int, seeds) -> list[float]:
    """row (at step k) - default, seed by seed, over the seeds where both have a test value."""
    pairs = [(test_of(recs.get((row, k, s))), test_of(recs.get(("default", 0, s)))) for s in seeds]
    return [a - b for a, b in pairs if a is not None and b is not None]


def borderline(recs: dict, row: str, k: int, seeds) -> bool:
    """Every seed of ``seeds`` run at step k, and the paired difference's mean within 1..3 standard errors: a
    verdict that two more seeds may change (the guide relies on no difference within 2 standard errors)."""
    if any((row, k, s) not in recs or ("default", 0, s) not in recs for s in seeds):
        return False
    d = paired_by_seed(recs, row, k, seeds)
    if len(d) < 2:
        return False
    mean, se = statistics.fmean(d), statistics.stdev(d) / math.sqrt(len(d))
    return se > 0 and se <= abs(mean) <= 3 * se


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
            folder: Path, device: str = "cpu") -> dict:
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
    points = [{"step": p["step"], "train_s": p["train_s"], "train_cpu_s": p.get("train_cpu_s"), "wall_s": p["wall_s"],
               "value": p.get(col["val"])} for p in curve.get("points", [])]
    gv = grad_vars(run_dir) if run_dir is not None else []
    val_last = points[-1]["value"] if points else None
    record = {"column": column, "recipe": col["recipe"], "row": row, "spec": spec, "settings":
              spec_settings["settings"], "lr_key": col["lr_key"], "lr": lr, "lr_step": k, "seed": seed,
              "headline": col["headline"], "test": result["metrics"].get(col["headline"]),
              "test_metrics": result["metrics"], "val": col["val"], "val_last": val_last, "curve": points,
              "grad_var": statistics.fmean(g["grad_var"] for g in gv) if gv else None, "grad_var_points": gv,
              "train_s": curve.get("train_s"), "train_cpu_s": curve.get("train_cpu_s"), "batches": curve.get("batches"),
              "wall_s": result["wall_s"],
              "command": result["command"].replace(str(runs), "<runs>"), "extra": extra, "device": str(device),
              "machine": f"{platform.node()}, {platform.machine()}, {platform.python_version()}",
              "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "failure": None if result["rc"] == 0 else {"rc": result["rc"], "error": result.get("error", "")}}
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f"{name}.json.tmp"
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    tmp.replace(folder / f"{name}.json")
    return record


def hold(folder: Path, name: str):
    """This runner's hold on run ``name``: its ``<name>.claim`` file beside the records, open with an exclusive
    flock (the kernel lets go of it when the process ends, killed or not); None when another runner holds it or
    its record is written."""
    import fcntl  # POSIX: the runners run on Linux (the module itself imports anywhere)

    folder.mkdir(parents=True, exist_ok=True)
    f = open(folder / f"{name}.claim", "a")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        return None
    if (folder / f"{name}.json").exists():  # finished by another runner while this one read the plan
        release(folder, name, f)
        return None
    return f


def release(folder: Path, name: str, held) -> None:
    """Let go of a hold (the claim file goes first: a runner waiting on it then finds the record)."""
    (folder / f"{name}.claim").unlink(missing_ok=True)
    held.close()


def in_flight(folder: Path) -> list[str]:
    """The runs other runners are training now: claim files whose flock is taken (a claim file left by a runner
    that was killed is free and not listed)."""
    import fcntl

    out = []
    for path in sorted(folder.glob("*.claim")):
        try:
            with open(path) as f:
                fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except FileNotFoundError:  # released meanwhile
            continue
        except BlockingIOError:
            out.append(path.name.removesuffix(".claim"))
    return out


def wait_for(claim: Path) -> None:
    """Block until the run of this claim file is released (its runner wrote its record, or ended)."""
    import fcntl

    try:
        with open(claim) as f:
            fcntl.flock(f, fcntl.LOCK_SH)  # granted when the holder lets go
    except FileNotFoundError:  # released already
        pass


def collect_column(column: str, records: Path) -> None:
    """A column's part file and figure, in a fresh process (--collect): the runs' imports stay out of it."""
    subprocess.run([sys.executable, __file__, "--collect", column, "--records", str(records)], check=False)


def run_columns(columns: list[str], records: Path, runs: Path, extra: list[str], only: list[str] | None,
                seeds: tuple[int, ...], device: str = "cpu") -> None:
    """The columns' missing runs one at a time, the first column's before the next one's; the plan is read again
    after each run, so a step size is picked as soon as seed 0's runs are in. Runners started side by side (one
    per core, the same command) share the work: each holds the run it trains (``hold``) and the others pass it by;
    a runner that finds nothing free while others still train waits for one of them to finish. The runner that
    writes a column's last record makes its part file and figure (--collect)."""
    while True:
        waiting: list[Path] = []  # the claim files of the runs in flight where nothing is free
        for column in columns:
            fits, _, _ = rows_for(column)
            rows = [r for r in fits if not only or r == "default" or r in only]
            folder = records / column
            recs, flying = records_of(folder), in_flight(folder)
            todo = [c for c in plan(column, recs, rows, seeds) if slug(*c) not in flying]
            if not todo:
                waiting += [folder / f"{name}.claim" for name in flying]
                continue
            row, k, seed = todo[0]
            name = slug(row, k, seed)
            held = hold(folder, name)
            if held is None:  # another runner took it a moment ago: read the plan again
                break
            t0 = time.time()
            print(f"{time.strftime('%H:%M:%S')} {column} {row} lr step {k:+d} seed {seed} "
                  f"({len(recs)} done, {len(todo)} decidable left)", flush=True)
            try:
                rec = run_one(column, row, fits[row], k, seed, runs, extra, folder, device)
            finally:
                release(folder, name, held)
            print(f"    {rec['headline']} {rec['test']} val {rec['val_last']} in {time.time() - t0:.0f} s"
                  + (f" FAILED {rec['failure']}" if rec["failure"] else ""), flush=True)
            if not plan(column, records_of(folder), rows, seeds) and not in_flight(folder):
                print(f"{time.strftime('%H:%M:%S')} {column}: every run has its record", flush=True)
                collect_column(column, records)
            break
        else:  # nothing free in any column
            if not waiting:
                return
            print(f"{time.strftime('%H:%M:%S')} waiting for a run in flight: "
                  f"{', '.join(f'{c.parent.name}/{c.stem}' for c in waiting)}", flush=True)
            wait_for(waiting[0])


# ---------------------------------------------------------------- a column from its records


def claim(diffs: list[float], higher: bool) -> str:
    """'better' or 'worse' than the default when the paired difference (row - default, by seed) exceeds 2
    standard errors and has the mean's sign on most seeds; else 'ties'."""
    d = [x for x in diffs if x is not None and math.isfinite(x)]
    if len(d) < 2:
        return "too few seeds"
    mean, se = statistics.fmean(d), statistics.stdev(d) / math.sqrt(len(d))
    same_sign = sum(1 for x in d if x * mean > 0)
    if mean == 0 or abs(mean) <= 2 * se or same_sign * 2 <= len(d):
        return "ties"
    return "better" if (mean > 0) == higher else "worse"


CLOCKS = {"train_s": "wall time of one thread on a shared machine", "train_cpu_s": "CPU time of the training thread"}


def clock_of(recs: dict) -> str:
    """The seconds a column's budget and curves count: the training thread's CPU time where every run recorded
    it (records from CurveTimer without ``train_cpu_s`` lack it; other processes and pauses do not inflate it),
    else wall time."""
    has_cpu = recs and all(r.get("train_cpu_s") is not None for r in recs.values())
    return "train_cpu_s" if has_cpu else "train_s"


def at_budget(rec: dict, budget: float | None, clock: str = "train_s") -> float | None:
    """The run's last validation value within ``budget`` training seconds (None: no validation by then)."""
    if budget is None:
        return None
    inside = [p["value"] for p in rec["curve"] if p[clock] <= budget]
    return inside[-1] if inside else None


def cell(recs: dict, row: str, k: int, seeds: tuple[int, ...], base: dict | None, higher: bool,
         budget: float | None, clock: str = "train_s") -> dict:
    """A row at one step size: per-seed test values, their spread, the paired difference against the default
    (Δ, its standard error, the verdict), gradient variance, training seconds, the value within the budget."""
    from zoo.spread import paired, spread

    seeds = tuple(seeds) + tuple(s for s in MORE_SEEDS if s not in seeds and (row, k, s) in recs)
    runs = [recs.get((row, k, s)) for s in seeds]
    test = [test_of(r) for r in runs]
    out = {"lr": runs[0]["lr"] if runs[0] else None, "lr_step": k, "seeds": list(seeds), "test": spread(test),
           "grad_var": spread([r["grad_var"] if r else None for r in runs]),
           "train_s": spread([r[clock] if r else None for r in runs]),
           "at_budget": spread([at_budget(r, budget, clock) if r else None for r in runs]),
           "failures": [{"seed": r["seed"], **r["failure"]} for r in runs if r and r["failure"]],
           "not_run": [s for s, r in zip(seeds, runs) if r is None]}
    if base is not None and row != "default":
        b = dict(zip(base["seeds"], base["test"]["values"]))
        pairs = [(a, b.get(s)) for s, a in zip(seeds, test) if a is not None and b.get(s) is not None]
        out["vs_default"] = paired([a for a, _ in pairs], [c for _, c in pairs])
        out["verdict"] = claim(out["vs_default"]["diffs"], higher)
    return out


def start_caveat(column: str, recs: dict) -> str:
    """Where a column's estimator phase begins (a test metric every run records, e.g. SeqGAN's MLE-pretrained G)
    against where the default ends, so a row's Δ reads on the scale of what the phase moves."""
    if "start" not in COLUMNS[column]:
        return ""
    key, what = COLUMNS[column]["start"]
    starts: dict[int, set] = {}
    for (_, _, seed), r in recs.items():
        if not r["failure"] and key in (r.get("test_metrics") or {}):
            starts.setdefault(seed, set()).add(round(r["test_metrics"][key], 6))
    ends = {s: r["test"] for (row, k, s), r in recs.items() if row == "default" and k == 0 and not r["failure"]}
    pairs = [(min(starts[s]), end) for s, end in ends.items() if len(starts.get(s, ())) == 1]  # (start, end)
    if not pairs:
        return ""
    start = statistics.mean(a for a, _ in pairs)
    moved = statistics.mean(b - a for a, b in pairs)
    same = "the same for every row at a seed" if all(len(v) == 1 for v in starts.values()) else "per seed"
    return (f"Every run begins the estimator's phase from {what} {key} ({same}: {num(start)} over the default's "
            f"seeds); the default moves it by {moved:+.3f}, so a row's Δ is on that scale.")


def in_spread(column: str, default: dict) -> dict:
    """The default's test values against the recipe's seed record (benchmarks/results/seeds_<recipe>_cpu.json):
    inside when its mean lies within the record's mean ± 2 sd (or its min..max when wider)."""
    col = COLUMNS[column]
    path = RESULTS / col["seed_record"]
    rec = json.loads(path.read_text())["summary"][col["headline"]]
    lo = min(rec["min"], rec["mean"] - 2 * (rec["sd"] or 0))
    hi = max(rec["max"], rec["mean"] + 2 * (rec["sd"] or 0))
    mean = default["test"]["mean"]
    return {"record": col["seed_record"], "mean": rec["mean"], "sd": rec["sd"], "values": rec["values"],
            "range": [lo, hi], "inside": mean is not None and lo <= mean <= hi}


def collect(column: str, records: Path = RECORDS, seeds: tuple[int, ...] = SEEDS, figures: Path | None = None) -> dict:
    """The column's part file (<records>/<column>.json), table (.md) and curves figure from its run records; the
    figure goes to docs/estimators/ for the committed records, else beside the records (a scratch folder's curves
    never replace the published ones)."""
    col = COLUMNS[column]
    fits, why, same = rows_for(column)
    recs = records_of(records / column)
    rows = [r for r in fits if any(key[0] == r for key in recs)]
    higher = col["higher"]
    clock = clock_of(recs)
    base = cell(recs, "default", 0, seeds, None, higher, None, clock)
    budget = base["train_s"]["values"]
    budget = statistics.median([b for b in budget if b is not None]) if any(b is not None for b in budget) else None
    base["at_budget"] = cell(recs, "default", 0, seeds, None, higher, budget, clock)["at_budget"]
    cells = {"default": {"spec": spec_text(fits["default"]["spec"]), "recipe_lr": base, "lr_search": {}}}
    for row in rows:
        if row == "default":
            continue
        pick, _ = lr_pick(recs, row, higher)
        search = {f"{r['lr']:g}": {"lr_step": k, "val_last": r["val_last"], "test": r["test"],
                                   "failure": r["failure"]}
                  for (rw, k, s), r in sorted(recs.items(), key=lambda kv: kv[0][1]) if rw == row and s == 0}
        c = {"spec": spec_text(fits[row]["spec"]) + ("" if not fits[row]["settings"] else
                                                     " with " + " ".join(fits[row]["settings"])),
             "lr_search": search, "picked_lr_step": pick,
             "recipe_lr": cell(recs, row, 0, seeds, base, higher, budget, clock)}
        if pick is not None:
            c["best_lr"] = cell(recs, row, pick, seeds, base, higher, budget, clock)
        cells[row] = c
    todo = plan(column, recs, list(fits), seeds)
    part = {"column": column, "recipe": col["recipe"], "headline": col["headline"], "val": col["val"],
            "higher_is_better": higher, "lr_key": col["lr_key"], "recipe_lr": recipe_lr(column),
            "settings": ["threads=1", "logger=[csv]", "trainer.enable_progress_bar=false",
                         f"callbacks=[CurveTimer, grad_variance every {col['probe_every']} steps x {REPEATS}]",
                         *col["settings"]],
            "budget_s": budget, "clock": clock, "complete": not todo and all(
                r == "default" or c.get("best_lr") is not None for r, c in cells.items()) and set(rows) == set(fits),
            "runs": len(recs), "runs_left": len(todo),
            "cpu_min": round(sum(r["wall_s"] for r in recs.values()) / 60, 1),
            "spread": in_spread(column, base) if base["test"]["n"] else None, "cells": cells, "cannot_fit": why,
            "same_as_default": same, "note": NOTES.get(column, ""),
            "caveat": " ".join(filter(None, (CAVEATS.get(column, ""), start_caveat(column, recs)))),
            "command": f"python benchmarks/estimator_matrix.py --run {column}; --collect {column}",
            "extra": sorted({x for r in recs.values() for x in r.get("extra", [])})}
    times = records / f"{column}_step_times.json"
    if times.is_file():
        part["step_times"] = json.loads(times.read_text())
    (records / f"{column}.json").write_text(json.dumps(part, indent=1) + "\n")
    (records / f"{column}.md").write_text(column_table(part) + "\n")
    figures = figures or (FIGURES if records.resolve() == RECORDS.resolve() else records)
    figure(column, recs, part, figures / f"matrix_{column}.png")
    return part


FIGURES = ROOT / "docs" / "estimators"


def figure(column: str, recs: dict, part: dict, path: Path) -> None:
    """Each row's validation metric (at its picked step size) against steps and against training seconds: the
    median over seeds (one diverged seed does not carry the line), the band their min..max. A column whose rows
    reach 10x the default's last value in size (diverged policies) is drawn on a symmetric log scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.8), sharey=True, layout="constrained")
    shown: list[float] = []
    default_end = None
    for row, c in part["cells"].items():
        k = 0 if row == "default" else c.get("picked_lr_step")
        runs = [recs.get((row, k, s)) for s in SEEDS + MORE_SEEDS] if k is not None else []
        runs = [r for r in runs if r] or [None]
        curves = [r["curve"] for r in runs if r and r["curve"] and not r["failure"]]
        if not curves:
            continue
        n = min(len(cv) for cv in curves)
        values = [[cv[i]["value"] if cv[i]["value"] is not None else math.nan for cv in curves] for i in range(n)]
        mid = [statistics.median(v) for v in values]
        lo, hi = [min(v) for v in values], [max(v) for v in values]
        shown += [m for m in mid if math.isfinite(m)]
        if row == "default":
            default_end = mid[-1]
        lr = f"lr {curves and runs[0]['lr']:g}" if runs[0] else ""
        label = f"{row} ({lr}, {len(curves)} seed{'s' if len(curves) != 1 else ''})"
        for ax, key in zip(axes, ("step", part.get("clock", "train_s"))):
            x = [statistics.fmean(cv[i][key] for cv in curves) for i in range(n)]
            (line,) = ax.plot(x, mid, label=label)
            ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.2)
    scale = abs(default_end) if default_end and math.isfinite(default_end) else None
    if shown and scale and max(abs(v) for v in shown) > 10 * scale:
        axes[0].set_yscale("symlog", linthresh=scale)
        axes[0].set_ylim(min(shown) - 0.1 * abs(min(shown)), max(shown) + 0.1 * abs(max(shown)))
    elif shown:  # the first validations' values (an untrained model) would squeeze the rest: 85 % of them in view
        ordered = sorted(shown, reverse=part["higher_is_better"])
        end, cut = ordered[0], ordered[int(0.85 * (len(ordered) - 1))]
        pad = 0.05 * abs(cut - end) or 1.0
        axes[0].set_ylim(*sorted((end - pad if end < cut else end + pad, cut)))
    if part["budget_s"]:
        axes[1].axvline(part["budget_s"], color="gray", ls=":", lw=1)
    axes[0].set_xlabel("optimizer step")
    axes[1].set_xlabel(f"training seconds ({CLOCKS[part.get('clock', 'train_s')]};\nprobes and validation excluded; "
                       "dotted: the default's budget)")
    axes[0].set_ylabel(f"{part['val']} ({'higher' if part['higher_is_better'] else 'lower'} is better)")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=3, fontsize=7)
    fig.suptitle(f"{column} ({part['recipe']} at its own length): each row at its picked step size, median and "
                 "min..max over seeds", fontsize=9)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def num(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "—"
    if x != 0 and (abs(x) < 1e-2 or abs(x) >= 1e5):
        return f"{x:.2e}"
    return f"{x:.{digits}f}"


def seeds_text(c: dict, digits: int = 3) -> str:
    """The per-seed test values ('not run' where the seed has no record yet)."""
    missing = set(c.get("not_run", []))
    return " / ".join(num(v, digits) if v is not None else "not run" if seed in missing else "failed"
                      for seed, v in zip(c["seeds"], c["test"]["values"]))


def cell_text(c: dict) -> str:
    """A cell of the column table: mean ± sd, the per-seed values, Δ ± se and the verdict."""
    from zoo.spread import fmt

    text = f"{fmt(c['test'], 3)} ({seeds_text(c)})"
    d = c.get("vs_default")
    if d and d["mean"] is not None:
        text += f"<br>Δ {d['mean']:+.3f}" + (f" ± {d['se']:.3f}" if d["se"] is not None else "") + f", {c['verdict']}"
    if c["failures"]:
        text += f"<br>{len(c['failures'])} failed"
    return text


def column_table(part: dict, link: str = "../../../docs") -> str:
    """Markdown: one row per estimator, at the recipe's step size and at its picked one."""
    better = "higher" if part["higher_is_better"] else "lower"
    sp = part.get("spread")
    load = part.get("step_times", {}).get("load_1min")
    load = "—" if load is None else f"{load:.1f}"
    lines = [f"### {part['column']}: {part['recipe']} at its own length, {part['headline']} ({better} is better)", ""]
    if sp:
        mean = part["cells"]["default"]["recipe_lr"]["test"]["mean"]
        lines.append(f"The default's {part['headline']} {num(mean)} is {'inside' if sp['inside'] else 'OUTSIDE'} "
                     f"the recipe's seed spread ({num(sp['mean'])} ± {num(sp['sd'])}, {sp['record']}: "
                     f"{num(sp['range'][0])}..{num(sp['range'][1])}).")
    lines.append(f"{'Complete' if part['complete'] else 'Incomplete'}: {part['runs']} runs recorded "
                 f"({part['cpu_min']} min of runs, wall clock), {part['runs_left']} decidable left. Step size: "
                 f"{part['lr_key']} "
                 f"(the recipe's {part['recipe_lr']:g}); Δ is the paired difference against the default by seed ± its "
                 "standard error; 'better'/'worse' where it exceeds 2 standard errors with the same sign on most "
                 f"seeds, else 'ties'. Budget: the default's training seconds ({num(part['budget_s'], 1)} s, the "
                 f"median over its seeds; seconds of training steps, {CLOCKS[part.get('clock', 'train_s')]}, probes "
                 "and validation excluded). ms/step: --step-times (one batch, rows interleaved in one process, the "
                 f"median and the fastest; 1-minute load average {load} while measured).")
    times = part.get("step_times", {}).get("rows", {})
    lines += ["", "| row | at the recipe's lr | at its best lr | lrs tried (last val) | grad var | train s | "
              "val within the budget | ms/step (evaluations) |", "|---|---|---|---|---|---|---|---|"]
    for row, c in part["cells"].items():
        best = c.get("best_lr") or (c["recipe_lr"] if row == "default" else None)
        tried = ", ".join(f"{lr}: {num(v['val_last'])}" for lr, v in c["lr_search"].items()) or "the recipe's"
        shown = best or c["recipe_lr"]
        t = times.get(row)
        lines.append(f"| {row}" + (f" `{c['spec']}`" if row == "default" else "") + f" | {cell_text(c['recipe_lr'])} | "
                     + (f"lr {best['lr']:g}: {cell_text(best)}" if best and row != "default" else
                        "(the recipe's)" if row == "default" else "not picked yet")
                     + f" | {tried} | {num(shown['grad_var']['mean'])} | {num(shown['train_s']['mean'], 1)} | "
                     f"{num(shown['at_budget']['mean'])} | "
                     + (f"{t['ms']:.1f}, min {t['min']:.1f} ({t['evaluations']})" if t else "—") + " |")
    for row, why in part["cannot_fit"].items():
        lines.append(f"| {row} | cannot fit: {why} | | | | | | |")
    if part["same_as_default"]:
        lines.append(f"| {part['same_as_default']} | = the default | | | | | | |")
    lines += ["", *(f"- {part[k]}" for k in ("caveat", "note") if part.get(k)),
              f"- curves: [docs/estimators/matrix_{part['column']}.png]({link}/estimators/matrix_{part['column']}.png)"]
    return "\n".join(x for x in lines if x is not None)


# ---------------------------------------------------------------- the published record and the guide

DOCS = ROOT / "docs" / "estimators.md"
GUIDE_START, GUIDE_END = "<!-- matrix-guide: generated by estimator_matrix.py --publish -->", "<!-- /matrix-guide -->"
GUIDE = {  # column -> the node it answers for (the guide's bullet)
    "dvae": "**Discrete latents, differentiable cost** (the discrete VAE's 20 × 10 categoricals, column `dvae`)",
    "seqgan": "**Token sequences** (SeqGAN's generator, column `seqgan`)",
    "sat_hard": "**Attention locations** (hard attention, column `sat_hard`)",
    "vae": "**Continuous latents** (the Gaussian VAE, column `vae`)",
    "maml_rl": "**Policies** (MAML-RL's Gaussian actions, column `maml_rl`)",
}


def publish(records: Path = RECORDS, out: Path = OUT, docs: Path = DOCS) -> dict:
    """estimator_matrix.json and .md from the complete columns' part files (a column in progress named, with its
    runs so far), and the guide in docs/estimators.md between its markers."""
    parts = {c: json.loads((records / f"{c}.json").read_text()) for c in ORDER if (records / f"{c}.json").is_file()}
    done = {c: p for c, p in parts.items() if p["complete"]}
    record = {"command": "python benchmarks/estimator_matrix.py --publish", "columns": done,
              "in_progress": {c: {"runs": p["runs"], "runs_left": p["runs_left"], "cpu_min": p["cpu_min"]}
                              for c, p in parts.items() if not p["complete"]},
              "dropped": DROPPED}
    out.write_text(json.dumps(record, indent=1) + "\n")
    md = ["# The estimator matrix", "", "Each column its recipe at its own length, each row at its best step size "
          "(`python benchmarks/estimator_matrix.py --publish`; the runs' records under "
          "`benchmarks/results/estimator_matrix/`).", ""]
    for c in ORDER:
        if c in done:
            md += [column_table(done[c], link="../../docs"), ""]
        elif c in parts:
            md += [f"### {c}: being re-measured ({parts[c]['runs']} runs recorded, {parts[c]['runs_left']} "
                   "decidable left)", ""]
    md += [f"- {c} (no column): {why}" for c, why in DROPPED.items()]
    out.with_suffix(".md").write_text("\n".join(md) + "\n")
    text = docs.read_text()
    a, b = text.index(GUIDE_START) + len(GUIDE_START), text.index(GUIDE_END)
    docs.write_text(text[:a] + "\n" + guide(record) + "\n" + text[b:])
    return record


def guide(record: dict) -> str:
    """The guide's bullets: per column, the default, then the rows the paired differences call better or worse
    than it (at each row's best step size), the ties, the gradient variances; a column not re-measured says so."""
    lines = []
    for c in ORDER:
        part = record["columns"].get(c)
        if part is None:
            left = record["in_progress"].get(c)
            lines.append(f"- {GUIDE[c]}: being re-measured at the recipe's length"
                         + (f" ({left['runs']} runs recorded so far)" if left else "") + "; no conclusion yet.")
            continue
        d = part["cells"]["default"]["recipe_lr"]
        sp = part["spread"]
        text = (f"- {GUIDE[c]}: the default `{part['cells']['default']['spec']}` {num(d['test']['mean'])} "
                f"± {num(d['test']['sd'])} {part['headline']} (seeds {seeds_text(d)}; the recipe's seeds "
                f"{num(sp['mean'])} ± {num(sp['sd'])}).") + (f" {part['caveat']}" if part.get("caveat") else "")
        groups: dict[str, list[str]] = {"better": [], "worse": [], "ties": [], "too few seeds": []}
        for row, cl in part["cells"].items():
            if row == "default":
                continue
            b = cl["best_lr"]
            v = b["vs_default"]
            delta = "no seed pair" if v["mean"] is None else f"Δ {v['mean']:+.3f}" + (
                f" ± {v['se']:.3f}" if v["se"] is not None else "")
            groups[b["verdict"]].append(
                f"`{row}` (lr {b['lr']:g}: {delta}, seeds {' / '.join(f'{x:+.3f}' for x in v['diffs'])}; "
                f"var {num(b['grad_var']['mean'])})")
        for verdict, what in (("better", "Better than the default"), ("worse", "Worse"), ("ties", "Ties"),
                              ("too few seeds", "Too few seeds trained (failed runs)")):
            if groups[verdict]:
                text += f" {what}: " + ", ".join(groups[verdict]) + "."
        text += f" The default's gradient variance: {num(d['grad_var']['mean'])}."
        lines.append(text)
    shown = [c for c in ORDER if c in record["columns"]]
    if shown:  # the published columns' curves, under the bullets (docs/estimators.md links them relatively)
        lines += ["", "Each published column's rows at their picked step sizes, validation metric against optimizer "
                  "steps and against training seconds (median and min..max over seeds):", ""]
        for c in shown:
            lines += [f"![estimator matrix, column {c}: validation curves]({FIGURES.name}/matrix_{c}.png)", ""]
    return "\n".join(lines)


# ---------------------------------------------------------------- step times, apart from training

STEP_SETTINGS = {"sat_hard": ["model.expected_context_prob=0.0"]}  # hard attention from the first step (the
# recipe's soft start would time the expected context, which samples nothing)


def evaluations(column: str, spec_settings: dict, cfg: dict) -> str:
    """What one estimator step evaluates: the batch, the samples per input, SeqGAN's rollouts."""
    from zoo.estimators.seam import resolve

    m, d = cfg["model"], cfg["data"]
    name, _, opts = resolve(spec_settings["spec"])
    if column == "seqgan":
        group = int(m.get("group_size") or 1)
        rollouts = int(m.get("rollouts") or 0)
        if name in ("gumbel_softmax", "straight_through"):  # through D's score of the relaxed sequence
            return f"{int(d['batch_size']) * group} sequences of {d['seq_len']} tokens, D's score (no rollouts)"
        return (f"{int(d['batch_size']) * group} sequences of {d['seq_len']} tokens"
                + (f", {rollouts} rollouts a token" if rollouts else ", the final D score (no rollouts)"))
    if column == "maml_rl":
        return f"{d['meta_batch']} tasks x {m['trajectories']} trajectories x {m['horizon']} steps, inner + outer"
    _, node, _, _ = node_of(COLUMNS[column]["recipe"])
    n = node.samples or getattr(opts, "n", None) or 1
    text = f"batch {d['batch_size']}, {n} sample{'s' if n > 1 else ''} per input"
    if name == "relax":
        text += " + the control variate at z and z~"
    return text


STEP_BUDGET_S = 60.0  # a column's timing rounds take about this long (at least 5 and at most 200 rounds)


def step_times(column: str, records: Path = RECORDS, repeats: int | None = None) -> dict:
    """ms per estimator step (estimator_loss on one batch and its gradient to the node's parameters, as the
    gradient-variance probe takes it) of every row, in one process on one thread, rows interleaved, repeated
    (5 to 200 rounds, about STEP_BUDGET_S seconds); the median and the range. Written to
    <records>/<column>_step_times.json (the part file shows it)."""
    import torch

    from zoo.config import load_config
    from zoo.runner import build

    torch.set_num_threads(1)
    col = COLUMNS[column]
    fits, _, _ = rows_for(column)
    models, batch = {}, None
    for row, r in fits.items():
        spec = r["spec"]
        cfg = load_config(col["recipe"], [f"model.estimator={json.dumps(spec) if isinstance(spec, dict) else spec}",
                                          *r["settings"], *STEP_SETTINGS.get(column, [])])
        torch.manual_seed(0)
        dm, model = build(cfg)
        if batch is None:
            batch = next(iter(dm.train_dataloader()))  # one batch for every row
        params = [p for p in (model.estimator_parameters() if hasattr(model, "estimator_parameters")
                              else model.parameters()) if p.requires_grad]
        models[row] = (model.train(), params, evaluations(column, r, cfg))

    def one(row: str) -> float:
        model, params, _ = models[row]
        t0 = time.perf_counter()
        loss = model.estimator_loss(batch)
        torch.autograd.grad(loss, params, allow_unused=True)
        return 1000 * (time.perf_counter() - t0)

    rows = list(models)
    t0 = time.perf_counter()
    for row in rows:  # warm-up; its time sizes the rounds
        one(row)
    repeats = repeats or max(5, min(200, int(STEP_BUDGET_S / (time.perf_counter() - t0))))
    ms: dict[str, list[float]] = {row: [] for row in rows}
    for i in range(repeats):
        for row in rows[i % len(rows):] + rows[:i % len(rows)]:  # each repeat starts at another row
            ms[row].append(one(row))
    out = {"command": f"python benchmarks/estimator_matrix.py --step-times {column}", "repeats": repeats,
           "threads": 1, "machine": f"{platform.node()}, {platform.machine()}",
           "load_1min": os.getloadavg()[0], "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "rows": {row: {"ms": statistics.median(v), "min": min(v), "max": max(v), "evaluations": models[row][2]}
                    for row, v in ms.items()}}
    records.mkdir(parents=True, exist_ok=True)
    (records / f"{column}_step_times.json").write_text(json.dumps(out, indent=1) + "\n")
    for row, t in out["rows"].items():
        print(f"{column} {row}: {t['ms']:.1f} ms ({t['min']:.1f}..{t['max']:.1f}), {t['evaluations']}")
    return out


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
    ap.add_argument("--device", default="cpu", help="where the runs train: cpu (default), cuda, cuda:1, ... (recorded)")
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
        from benchmarks.common.devices import accelerator, resolve_device  # torch: for the runs only

        device = resolve_device(args.device)
        acc, devices = accelerator(device)
        on = [] if device.type == "cpu" else [f"trainer.accelerator={acc}", f"trainer.devices={devices}"]
        run_columns(args.run.split(","), records, Path(args.runs), [*args.extra, *on], only, seeds, str(device))
        return
    if args.collect:
        for c in args.collect.split(","):
            print(column_table(collect(c, records)))
        return
    if args.publish:
        publish(records)
        return
    if args.step_times:
        for c in args.step_times.split(","):
            step_times(c, records)
        return
    ap.print_help()


if __name__ == "__main__":
    main()
