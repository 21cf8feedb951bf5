"""Every estimator on every stochastic node: each model's stochastic node trained with every estimator
of the registry that fits it, on short recipes, over seeds, through ``zoo.sweep``.

    python benchmarks/estimator_matrix.py --plan                 # the cells, and why a misfit does not fit
    nice python benchmarks/estimator_matrix.py --seeds 0,1,2      # every cell (see --estimate first)
    python benchmarks/estimator_matrix.py --models dvae,ood --seeds 0 --scale 0.2   # a quick look
    python benchmarks/estimator_matrix.py --estimate             # one run a model: the whole matrix's time
    python benchmarks/estimator_matrix.py --table                # the table again from the JSON

Rows: the registry's estimators with their default options, and each model's own estimator spec
(its recipe's, "default"); columns: the models' stochastic nodes (the discrete VAE's latents, hard
attention's locations, SeqGAN's tokens, MAML-RL's actions, the OOD GAN's generator noise). A cell is
the model's headline test metric (mean ± sd over the seeds), the gradient variance of the node's
parameters (the ``grad_variance`` callback: M repeated estimates on one batch every N steps, mean
over the measurements), the time per training step (batch start to end, the probes excluded), and
the paired difference by seed against the model's default estimator. A cell whose estimator cannot
train the node gives the reason from the capability check (``zoo.estimators.seam.mismatch``).

Each run is a normal ``python -m zoo.train`` run (one torch thread) in a sweep per model, folder
<--runs>/sweeps/matrix_<model>; started again, the runs that ended are skipped. Writes
benchmarks/results/estimator_matrix.json and estimator_matrix.md.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "estimator_matrix.json"

# column -> recipe, the short settings (at --scale 1), the headline metric and whether higher is better.
# Steps are the optimizer steps of the whole run (SeqGAN: its adversarial iterations, the phase where
# the estimator trains the generator; its MLE and discriminator phases are shortened alike for every row).
MODELS = {
    "dvae": {"recipe": "dvae_digits", "headline": "test/loss", "higher": False, "steps": 300,
             "short": lambda s: [f"trainer.max_steps={s}", "trainer.max_epochs=-1", "model.kl_warmup_steps=200",
                                 "model.iwae_samples=10", "model.plot_every_n_epochs=1000"],
             "probe_every": 50},
    "sat_hard": {"recipe": "sat_shapes_hard", "headline": "test/bleu4", "higher": True, "steps": 120,
                 "short": lambda s: [f"trainer.max_steps={s}", "trainer.max_epochs=-1", f"model.expected_context_hold="
                                     f"{s // 3}", f"model.expected_context_anneal={s // 3}"],
                 "probe_every": 50},
    # SeqGAN's steps are its adversarial iterations (an epoch each: 10 D steps and a G step on 640 sequences),
    # after 3 MLE epochs and one D pre-training epoch, the same for every row
    "seqgan": {"recipe": "seqgan_oracle_small", "headline": "test/nll_oracle", "higher": False, "steps": 6,
               "short": lambda s: ["data.num_train=640", "model.mle_epochs=3", "model.d_pretrain_rounds=1",
                                   f"model.adv_iterations={s}", "model.eval_samples=500", "model.test_samples=1000"],
               "probe_every": 50, "probe_steps": lambda s: 40 + 11 * s,
               # rows that need model options of their own (a sweep each): a group of 4 sequences per start for
               # rloo's leave-one-out baseline, with the final D score as every token's reward (no rollouts)
               "variants": {"rloo_group4_norollouts": {"spec": "rloo",
                                                       "settings": ["model.group_size=4", "model.rollouts=0"]},
                            # relax draws the tokens (its own sample()), rewards from the paper's 16 rollouts
                            "relax_rollouts16": {"spec": "relax", "settings": []}}},
    "maml_rl": {"recipe": "maml_nav2d", "headline": "test/return_1", "higher": True, "steps": 60,
                "short": lambda s: [f"trainer.max_steps={s}", "trainer.max_epochs=-1", "data.meta_batch=10"],
                "probe_every": 25, "rows": "baselines"},
    "vae": {"recipe": "vae_digits", "headline": "test/loss", "higher": False, "steps": 300,
            "short": lambda s: [f"trainer.max_steps={s}", "trainer.max_epochs=-1", "model.iwae_samples=10",
                                "model.plot_every_n_epochs=1000"],
            "probe_every": 50, "rows": "baselines"},
}
# columns left out, and why (the sentence the table prints under it)
DROPPED = {
    "ood_gan": "the OOD GAN's node z ~ N(0, I) has no parameters: G's weights get their gradient by "
               "backpropagation through G(z) whatever the estimator, so every row repeated one gradient to the "
               "last digit (2026-11-28's matrix); it has no column",
}
# extra rows for the columns marked "rows": "baselines": REINFORCE with each of its baselines (the registry's
# own rows take its default options, baseline none)
BASELINE_ROWS = {f"reinforce[{b}]": {"name": "reinforce", "baseline": b} for b in ("ema", "batch_mean", "learned")}
REPEATS = 8  # gradient estimates a measurement
NOTES = {  # what a reader of a column needs to know
    "maml_rl": "the variance is that of the meta-gradient to the policy (estimator_loss: a fresh meta-loss); the "
               "registry's rloo is the default's gradient (reinforce with a leave-one-out baseline over the "
               "trajectories); reinforce[learned] reads (goal, time)",
    "vae": "one Gaussian node z ~ N(mu(x), sigma(x)); reinforce[learned] reads the image",
    "sat_hard": "relax's control variate is per word (control: auto = per_variable on this sequential node); "
                "expectation and unordered_set need a location's own cost, which here is the rest of the caption",
    "seqgan": "score-function rows draw with G's sampler and reward each token with the paper's 16 rollouts; "
              "rloo_group4_norollouts draws 4 sequences per start (model.group_size=4) and rewards every token with "
              "the sequence's final D score (model.rollouts=0); relax_rollouts16 is relax (the registry's row) "
              "drawing the tokens with its own sample() and scoring them with the 16 rollouts; gumbel_softmax and "
              "straight_through draw the tokens "
              "themselves and backpropagate through D's score of the (relaxed) sequence (D reads one-hot rows "
              "through its embedding); every row's gradient estimates grad E[-D(Y)] / T, so the variances share "
              "one scale; a step is one training batch of the adversarial epochs (D steps, and the G step at the "
              "first batch)",
}


def __getattr__(name: str):
    """``StepTimer`` (the runs' callback, ``estimator_matrix:StepTimer``), made when first asked for: Lightning is
    imported by the runs, not by --merge, --plan or --table."""
    if name != "StepTimer":
        raise AttributeError(name)
    import lightning as L

    class StepTimer(L.Callback):
        """Wall time of the training steps (batch start -> batch end, before the gradient-variance probe,
        which comes after it in the callbacks), written to <run folder>/step_time.json at the end."""

        def __init__(self):
            self.total, self.steps, self._t0 = 0.0, 0, 0.0

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            self._t0 = time.perf_counter()

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            self.total += time.perf_counter() - self._t0
            self.steps += 1

        def on_train_end(self, trainer, pl_module):
            if trainer.is_global_zero:
                out = Path(trainer.default_root_dir) / "step_time.json"
                out.write_text(json.dumps({"steps": self.steps, "seconds": self.total}) + "\n")

    globals()["StepTimer"] = StepTimer
    return StepTimer


def node_of(recipe: str):
    """(model class, its StochasticNode, the recipe's model options, the recipe's estimator spec)."""
    from zoo.config import known_data_info, load_config
    from zoo.registry import MODELS as REGISTRY

    made: dict = {}
    cfg = load_config(recipe, made=made)
    cls = REGISTRY.entry(cfg["model"]["name"]).obj
    options = {k: v for k, v in cfg["model"].items() if k != "name"}
    node = cls.stochastic_node(cls.Config(**options), known_data_info(cfg["data"]["name"], made["data"]))  # the
    # data's sizes its options state (the oracle's vocabulary), as the recipe check reads them
    return cls, node, options, options.get("estimator") or cls.Config().estimator


def rows_for(recipe: str) -> tuple[dict, dict, str | None]:
    """({row: estimator spec} that fit the node, {row: why not} for those that do not, the registry row
    the model's own spec equals, if one does). The model's own spec is the row 'default'."""
    from zoo.estimators.seam import default_requirements, mismatch, resolve
    from zoo.registry import ESTIMATORS

    cls, node, options, default = node_of(recipe)
    d_name, d_cls, d_opts = resolve(default)
    fits, why, same = {"default": default}, {}, None
    column = next((c for c, m in MODELS.items() if m["recipe"] == recipe), None)
    extra = BASELINE_ROWS if column and MODELS[column].get("rows") == "baselines" else {}
    for name, spec in [*((n, n) for n in ESTIMATORS.list()), *extra.items()]:
        _, est_cls, opts = resolve(spec)
        reason = mismatch(est_cls.requirements(opts) if hasattr(est_cls, "requirements") else
                          default_requirements(est_cls), node, node.samples or getattr(opts, "n", None))
        if reason:
            why[name] = reason
        elif same is None and same_gradient(d_cls, d_opts, est_cls, opts, node):
            same = name
        else:
            fits[name] = spec
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


def grad_var(run_dir: Path) -> float | None:
    """Mean of the run's grad_var measurements (metrics.csv)."""
    path = run_dir / "logs" / "metrics.csv"
    if not path.is_file():
        return None
    with open(path) as f:
        values = [float(r["grad_var"]) for r in csv.DictReader(f) if r.get("grad_var")]
    return statistics.fmean(values) if values else None


def step_time(run_dir: Path) -> float | None:
    try:
        t = json.loads((run_dir / "step_time.json").read_text())
    except (OSError, ValueError):
        return None
    return t["seconds"] / t["steps"] if t["steps"] else None


def sweep_model(column: str, seeds: list[int], scale: float, runs: str, parallel: int, only: list[str] | None,
                device_args: list[str]) -> dict:
    """One model's column: a sweep over its fitting estimators x seeds, then each run's measures."""
    from zoo.spread import paired, spread
    from zoo.sweep import run_sweep

    m = MODELS[column]
    fits, why, same = rows_for(m["recipe"])
    left_out = sorted(k for k in fits if only and k not in only and k != "default")
    fits = {k: v for k, v in fits.items() if k not in left_out}
    steps = max(2, int(m["steps"] * scale))
    total = m["probe_steps"](steps) if "probe_steps" in m else steps  # optimizer steps of the whole run
    probe = max(1, min(m["probe_every"], total // 2))
    callbacks = (f"callbacks=[{{name: 'estimator_matrix:StepTimer'}}, "
                 f"{{name: grad_variance, every_n_steps: {probe}, repeats: {REPEATS}}}]")
    specs = {row: json.dumps(spec) if isinstance(spec, dict) else spec for row, spec in fits.items()}
    fixed = [f"run_dir={runs}", "threads=1", *device_args, *m["short"](steps), callbacks,
             "trainer.enable_progress_bar=false", "logger=[csv]"]
    env = {"PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    model_node = "model.estimator"  # every model names its estimator so (zoo.options.estimator_option)
    t0 = time.time()
    summary = run_sweep(m["recipe"], {model_node: list(specs.values()), "seed": [str(s) for s in seeds]}, fixed,
                        parallel, name=f"matrix_{column}", yes=True, env=env)
    by_spec = {v: k for k, v in specs.items()}
    runs_of = [(by_spec[r["values"][model_node]], spec_text(fits[by_spec[r["values"][model_node]]]), r)
               for r in summary["runs"]]
    for row, variant in m.get("variants", {}).items():  # rows with model options of their own
        if only and row not in only:
            left_out.append(row)
            continue
        spec = variant["spec"]
        text = spec_text(spec) + " with " + " ".join(variant["settings"])
        vs = run_sweep(m["recipe"], {model_node: [json.dumps(spec) if isinstance(spec, dict) else spec],
                                     "seed": [str(s) for s in seeds]}, fixed + variant["settings"], parallel,
                       name=f"matrix_{column}_{row}", yes=True, env=env)
        runs_of += [(row, text, r) for r in vs["runs"]]
    cells: dict[str, dict] = {}
    for row, text, r in runs_of:
        cell = cells.setdefault(row, {"spec": text, "seeds": [], "headline": [], "grad_var": [],
                                      "step_s": [], "failures": []})
        ok = r["rc"] == 0 and "run_dir" in r
        run_dir = Path(r["run_dir"]) if ok else None
        cell["seeds"].append(int(r["values"]["seed"]))
        cell["headline"].append(r["metrics"].get(m["headline"]) if ok else None)
        cell["grad_var"].append(grad_var(run_dir) if ok else None)
        cell["step_s"].append(step_time(run_dir) if ok else None)
        if not ok:
            cell["failures"].append({"seed": r["values"]["seed"], "rc": r["rc"], "error": r.get("error", "")})
    base = cells.get("default")
    for row, cell in cells.items():
        for key in ("headline", "grad_var", "step_s"):
            cell[key] = spread(cell[key])
        if row != "default" and base is not None:
            pairs = [(a, b) for a, b in zip(cell["headline"]["values"], base["headline"]["values"])
                     if a is not None and b is not None]
            cell["vs_default"] = paired([a for a, _ in pairs], [b for _, b in pairs])
    return {"recipe": m["recipe"], "headline": m["headline"], "higher_is_better": m["higher"],
            "settings": [f for f in fixed if not f.startswith("run_dir=")], "steps": steps, "node": model_node,
            "cells": cells, "cannot_fit": why,
            "same_as_default": same, "left_out": left_out,
            "sweep": summary["name"], "wall_s": round(time.time() - t0, 1)}


def fmt_cell(cell: dict) -> str:
    from zoo.spread import fmt

    h, g, t = cell["headline"], cell["grad_var"], cell["step_s"]
    text = fmt(h, 3)
    if g["mean"] is not None:
        text += f"<br>var {g['mean']:.2e}"
    if t["mean"] is not None:
        text += f"<br>{1000 * t['mean']:.0f} ms/step"
    d = cell.get("vs_default")
    if d and d["mean"] is not None:
        text += f"<br>Δ {d['mean']:+.3f}" + (f" ± {d['se']:.3f}" if d["se"] is not None else "")
    if cell["failures"]:
        text += f"<br>{len(cell['failures'])} failed"
    return text


def table(record: dict) -> str:
    """Markdown: rows estimators, columns models."""
    cols = list(record["models"])
    named = {r for c in cols for r in (*record["models"][c]["cells"], *record["models"][c]["cannot_fit"],
                                       *record["models"][c]["left_out"], record["models"][c]["same_as_default"])}
    rows = ["default"] + sorted(named - {"default", None})
    better = {c: "higher" if record["models"][c]["higher_is_better"] else "lower" for c in cols}
    head = [f"{c}: {record['models'][c]['headline']} ({better[c]} is better)" for c in cols]
    lines = ["| estimator | " + " | ".join(head) + " |", "|---" * (len(cols) + 1) + "|"]
    for row in rows:
        cells = []
        for c in cols:
            col = record["models"][c]
            if row in col["cells"]:
                cell = col["cells"][row]
                cells.append((f"`{cell['spec']}`: " if row == "default" else "") + fmt_cell(cell))
            elif row in col["cannot_fit"]:
                cells.append(f"cannot fit: {col['cannot_fit'][row]}")
            elif row == col.get("same_as_default"):
                cells.append("= the default")
            elif row in col.get("left_out", {}) or row in MODELS.get(c, {}).get("variants", {}):
                cells.append("fits; not run (--estimators)")
            else:  # another column's own row (a variant with model options of that model)
                cells.append("—")
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    lines += ["", *(f"- {c}: {NOTES[c]}" for c in cols if c in NOTES)]
    lines += [f"- {c} (no column): {why}" for c, why in record.get("dropped", {}).items()]
    lines += ["", f"{count_cells(record)} non-default cells measured (rows x columns with numbers, the default "
                  "and '= the default' aside)"]
    return "\n".join(lines)


def count_cells(record: dict) -> int:
    return sum(1 for col in record["models"].values() for row in col["cells"] if row != "default")


def merge(paths: list[str]) -> dict:
    """One record from part files (this script's --out, or another's in its format: SeqGAN's column): their
    columns side by side, each part's command and machine kept with its columns."""
    record: dict = {"parts": [], "models": {}, "dropped": dict(DROPPED)}
    for path in paths:
        part = json.loads(Path(path).read_text())
        record["parts"].append({k: v for k, v in part.items() if k not in ("models", "dropped")} | {"file": path})
        for column, data in part["models"].items():
            if column in record["models"]:
                raise SystemExit(f"column {column} is in two parts ({path} and an earlier one)")
            record["models"][column] = data
    record["command"] = "python benchmarks/estimator_matrix.py --merge " + " ".join(paths)
    return record


def main() -> None:
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(HERE))
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--device", default="cpu", help="where the runs train: cpu (default), cuda, cuda:1, ... (recorded)")
    ap.add_argument("--models", default=",".join(c for c in MODELS if c not in DROPPED),
                    help=f"comma-separated, of {', '.join(MODELS)}")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--estimators", default="", help="only these rows (and the default), comma-separated")
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies every model's training steps")
    ap.add_argument("--parallel", type=int, default=1, help="runs at once (one torch thread each)")
    ap.add_argument("--runs", default="runs/bench_estimator_matrix", help="the sweeps' folders go here")
    ap.add_argument("--plan", action="store_true",
                    help="print the cells (and why a misfit does not fit); train nothing")
    ap.add_argument("--table", action="store_true", help="print the table of the recorded JSON; train nothing")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--merge", nargs="+", metavar="PART",
                    help="merge these part files (columns) into --out (JSON and .md); train nothing")
    args = ap.parse_args()
    out = Path(args.out)
    if args.merge:
        record = merge(args.merge)
        out.write_text(json.dumps(record, indent=1) + "\n")
        out.with_suffix(".md").write_text(table(record) + "\n")
        print(table(record))
        return
    if args.table:
        print(table(json.loads(out.read_text())))
        return
    columns = args.models.split(",")
    if args.plan:
        for c in columns:
            fits, why, same = rows_for(MODELS[c]["recipe"])
            print(f"{c} ({MODELS[c]['recipe']}): " + ", ".join(f"{k}={spec_text(v)}" for k, v in fits.items())
                  + (f" (the default is {same})" if same else ""))
            for k, v in why.items():
                print(f"    {k}: cannot fit: {v}")
        return
    from bench.devices import accelerator, describe, processor, resolve_device  # torch: for the runs only

    device = resolve_device(args.device)
    acc, devices = accelerator(device)
    seeds = [int(s) for s in args.seeds.split(",")]
    only = [e for e in args.estimators.split(",") if e] or None
    t0 = time.time()
    record = {"command": " ".join(["python", "benchmarks/estimator_matrix.py", *sys.argv[1:]]),
              "device": str(device), "device_name": describe(device), "processor": processor(),
              "machine": f"{platform.machine()}, {platform.python_version()}", "threads": 1,
              "parallel": args.parallel, "seeds": seeds, "scale": args.scale, "models": {},
              "dropped": {c: DROPPED[c] for c in DROPPED if c not in columns}}
    for c in columns:
        record["models"][c] = sweep_model(c, seeds, args.scale, args.runs, args.parallel, only,
                                          [f"trainer.accelerator={acc}", f"trainer.devices={devices}"])
        record["total_s"] = round(time.time() - t0, 1)
        out.write_text(json.dumps(record, indent=1) + "\n")  # after each column: a partial record survives
    out.with_suffix(".md").write_text(table(record) + "\n")
    print(table(record))
    print(f"{record['total_s']:.0f} s -> {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")


if __name__ == "__main__":
    main()
