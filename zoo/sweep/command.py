"""python -m zoo.sweep recipe=NAME KEY=V1,V2 ... [--parallel N] [--yes] [--launcher local|slurm]
python -m zoo.sweep --collect SWEEP_FOLDER

Every combination of the comma-separated values, each a normal ``python -m zoo.train`` run in its
own process and run folder, then one table: every test metric's mean ± sd and every run per
setting, the paired difference by seed against each option's first value, and the failures.

  recipe=NAME          the recipe every run trains (one)
  KEY=V1,V2,...        an option swept over its values (commas inside [...], {...} or quotes are
                       part of a value: 'model.estimator={name: rloo, n: 4},reinforce')
  KEY=VALUE            an option every run gets (run_dir=PATH: where the sweep folder goes)
  --parallel N         runs at once (each gets cores / N torch and OpenMP threads); under slurm,
                       the most jobs running at once
  --yes                allow more than MAX_COMBINATIONS runs
  --retry-failed       started again, run the runs that failed again too (by default a sweep started
                       again skips every run that ended; one stopped from outside goes on from its last.ckpt)
  --name NAME          the sweep's name and folder: <run_dir>/sweeps/<NAME>/ (default: the recipe and a
                       hash of the options, so the same command finds its folder again and skips the runs
                       that finished)
  --launcher slurm     each run a SLURM job through submitit (pip install 'zoo[slurm]'); --slurm KEY=VALUE
                       sets an executor parameter (timeout_min=120, partition=gpu, ...)
  --collect FOLDER     make the summary of a sweep folder from what its runs left (jobs still queued
                       are listed as not finished)

Writes <sweep folder>/sweep.json (the plan), <label>/result.json per run, summary.json (the table).
Exit status 0 when every run succeeded, 1 when one failed (the summary lists it), 2 for bad input
(refused before the first run starts).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import itertools
import json
import os
import re
import shlex
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from zoo import cli
from zoo.cli import CommandLineParser, exit_status
from zoo.config import load_config
from zoo.errors import UserError
from zoo.run_folder import check_writable
from zoo.spread import fmt, paired, spread
from zoo.sweep.runs import Run, Sweep, execute, finished, read_result, run_folder
from zoo.sweep.slurm import require_submitit, run_slurm

MAX_COMBINATIONS = 50  # more runs than this need --yes: a typo in a list should not start hundreds
SEED = "seed"
NOT_SWEPT = ("ckpt_path", "print_config", "run_dir")  # the sweep chooses each run's folder and resume
LAUNCHERS = ("local", "slurm")


# ---------------------------------------------------------------- the command line


def split_values(text: str) -> list[str]:
    """``'1e-3,3e-3'`` -> ['1e-3', '3e-3']; a comma inside [...], {...}, (...) or quotes is part of a
    value (``'[csv,wandb],[csv]'`` -> two lists). Empty items are kept (refused by the caller)."""
    items, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
    items.append(text[start:].strip())
    return items


def parse_items(items: list[str]) -> tuple[str, dict[str, list[str]], list[str]]:
    """(recipe, swept options, fixed key=value) from the command's ``key=value`` items."""
    recipe, swept, fixed, seen = None, {}, [], set()
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise UserError(f"malformed argument '{item}': write KEY=V1,V2 (swept) or KEY=VALUE (fixed), e.g. "
                            "seed=0,1,2 model.lr=1e-3,3e-3")
        if key in seen:
            raise UserError(f"{key} is given twice: give it once, with every value in one list ({key}=A,B)")
        seen.add(key)
        values = split_values(value)
        if key == "recipe":
            if len(values) > 1:
                raise UserError(f"recipe={value}: a sweep trains one recipe; run one sweep a recipe")
            recipe = value
            continue
        if any(not v for v in values):
            raise UserError(f"{key}={value} has an empty value in its list: give every value "
                            f"({key}=A,B; {key}=null for an unset optional option)")
        if len(values) > 1:
            if key in NOT_SWEPT:
                raise UserError(f"{key} cannot be swept: the sweep chooses each run's folder and resumes its runs "
                                "itself (run_dir=PATH, once, places the sweep folder)")
            swept[key] = values
        elif key in ("ckpt_path", "print_config"):
            raise UserError(f"{key}= is not a sweep option: a sweep started again resumes its unfinished runs "
                            "itself; python -m zoo.train takes it")
        else:
            fixed.append(item)
    if recipe is None:
        raise UserError("no recipe given: python -m zoo.sweep recipe=NAME KEY=V1,V2 ... (see --help)")
    return recipe, swept, fixed


UNSAFE = re.compile(r"[^\w.+-]+")  # characters a folder's name should not hold (runs of them: one '_')


def label_of(values: dict[str, str]) -> str:
    """A run's folder name from its swept values: 'model.lr=1e-3__seed=0' (characters a file name
    should not hold replaced, and a hash of the original added then, so two labels never meet)."""
    text = "__".join(f"{k}={v}" for k, v in values.items()) or "run"
    safe = "__".join(f"{k}={UNSAFE.sub('_', v).strip('_')}" for k, v in values.items()) or "run"
    if safe != text or len(safe) > 100:
        safe = f"{safe[:90]}-{hashlib.sha1(text.encode()).hexdigest()[:8]}"
    return safe


def default_name(recipe: str, swept: dict, fixed: list[str]) -> str:
    digest = hashlib.sha1(json.dumps([recipe, swept, fixed]).encode()).hexdigest()[:8]
    return f"{Path(recipe).stem}-{digest}"


def fixed_value(fixed: list[str], key: str) -> str | None:
    return next((item.split("=", 1)[1] for item in fixed if item.split("=", 1)[0] == key), None)


def machine_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def make_sweep(recipe: str, swept: dict, fixed: list[str], parallel: int, name: str | None,
               yes: bool, command: str, launcher: str = "local") -> Sweep:
    """The plan, every combination validated as ``python -m zoo.train`` would (``load_config``): a
    mistake in any of them is refused before the first run starts."""
    keys = list(swept)
    combos = [dict(zip(keys, vals)) for vals in itertools.product(*(swept[k] for k in keys))]
    if len(combos) > MAX_COMBINATIONS and not yes:
        sizes = " x ".join(f"{len(v)} ({k})" for k, v in swept.items())
        raise UserError(f"this sweep makes {len(combos)} runs ({sizes}), more than {MAX_COMBINATIONS}: add --yes to "
                        "start them all, or shorten the lists")
    name = name or default_name(recipe, swept, fixed)
    if not re.fullmatch(r"[\w.+-]+", name):
        raise UserError(f"--name {name!r}: use letters, digits, '.', '_', '+' and '-' (it names a folder)")
    folder = Path(fixed_value(fixed, "run_dir") or "runs") / "sweeps" / name
    fair = max(1, machine_cores() // parallel) if launcher == "local" else 0  # a cluster job: its own cpus_per_task
    runs = []
    for values in combos:
        overrides = [i for i in fixed if not i.startswith("run_dir=")] + [f"{k}={v}" for k, v in values.items()]
        given = values.get("threads", fixed_value(fixed, "threads"))  # the user's own: kept, OpenMP's set to it
        threads = int(given) if given is not None and given.isdigit() else fair
        if given is None and threads:
            overrides.append(f"threads={threads}")
        runs.append(Run(label_of(values), values, overrides, threads))
    sweep = Sweep(name, folder, recipe, swept, fixed, runs, command, parallel=parallel)
    validate(sweep)
    return sweep


def validate(sweep: Sweep) -> None:
    """Each combination through ``zoo.config.load_config`` (the checks of ``python -m zoo.train``, torch
    loaded once: ~4 s); fills each run's resources and whether W&B is on."""
    for i, run in enumerate(sweep.runs):
        try:
            cfg = load_config(sweep.recipe, [*run.overrides, f"run_dir={sweep.folder / run.label}"]).settings
        except UserError as err:
            what = ", ".join(f"{k}={v}" for k, v in run.values.items()) or "the fixed options"
            raise UserError(f"run {i + 1} of {len(sweep.runs)} ({what}) is refused: {err.message}",
                            details=err.details) from None
        run.resources = resources(cfg)
        run.limits = {k: cfg["trainer"][k] for k in ("max_epochs", "max_steps", "max_time") if k in cfg["trainer"]}
        sweep.wandb = sweep.wandb or "wandb" in cfg["logger"]


def resources(cfg: dict) -> dict:
    """What a run asks of a cluster, from its trainer section: nodes, tasks a node (Lightning's SLURM
    rule: one task a device), GPUs a node (accelerator gpu/cuda only), CPUs a task (its threads)."""
    trainer = cfg["trainer"]
    devices, nodes = trainer.get("devices", "auto"), trainer.get("num_nodes", 1)
    count = len(devices) if isinstance(devices, list) else devices if isinstance(devices, int) and devices > 0 else 1
    gpu = str(trainer.get("accelerator", "auto")) in ("gpu", "cuda")
    out = {"nodes": nodes if isinstance(nodes, int) else 1, "tasks_per_node": count}
    if gpu:
        out["gpus_per_node"] = count
    if cfg.get("threads"):
        out["cpus_per_task"] = cfg["threads"]
    max_time = trainer.get("max_time")
    if isinstance(max_time, str) and re.fullmatch(r"\d+:\d+:\d+:\d+", max_time):  # DD:HH:MM:SS, + 10 min to test
        d, h, m, s = (int(x) for x in max_time.split(":"))
        out["timeout_min"] = d * 1440 + h * 60 + m + (s + 59) // 60 + 10
    return out


# ---------------------------------------------------------------- the sweep


def open_folder(sweep: Sweep) -> None:
    """The sweep folder with its plan; one that holds another sweep's plan is refused."""
    path = sweep.folder / "sweep.json"
    if path.is_file():
        before = json.loads(path.read_text())
        if [r["label"] for r in before.get("runs", [])] != [r.label for r in sweep.runs] or \
                before.get("recipe") != sweep.recipe or before.get("fixed") != sweep.fixed:
            raise UserError(f"{sweep.folder} holds another sweep ({before.get('command')}): choose another --name")
    check_writable(sweep.folder)
    sweep.folder.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(sweep.plan(), indent=1) + "\n")


def run_local(sweep: Sweep, env: dict | None = None) -> None:
    """Every run not finished before, ``sweep.parallel`` at a time."""
    todo = []
    for run in sweep.runs:
        before = finished(run_folder(sweep.folder, run), sweep.retry_failed)
        if before:
            state = "succeeded" if before["rc"] == 0 else f"failed (exit status {before['rc']}; --retry-failed)"
            print(f"  {run.label}: {state} before, skipped", flush=True)
        else:
            todo.append(run)
    group = sweep.name if sweep.wandb else None

    def one(run: Run) -> None:
        result = execute(sweep.recipe, run, run_folder(sweep.folder, run), group, env)
        state = "ok" if result["rc"] == 0 else f"failed (exit status {result['rc']}): {result.get('error', '')}"
        print(f"  {run.label}: {state}, {result['wall_s']:.0f} s", flush=True)

    with ThreadPoolExecutor(max(1, sweep.parallel)) as pool:
        list(pool.map(one, todo))


def load_plan(folder: Path) -> Sweep:
    path = Path(folder) / "sweep.json"
    try:
        plan = json.loads(path.read_text())
    except OSError:
        raise UserError(f"--collect {folder}: no sweep.json there (a sweep folder is <run_dir>/sweeps/NAME)") from None
    except ValueError as err:
        raise UserError(f"--collect {folder}: sweep.json is not JSON ({err})") from None
    runs = [Run(**r) for r in plan["runs"]]
    return Sweep(plan["name"], Path(folder), plan["recipe"], plan["options"], plan["fixed"], runs, plan["command"])


def summarise(sweep: Sweep) -> dict:
    """The table from the runs' result.json files: per setting (the swept values other than the seed)
    each test metric's spread over the seeds, the paired differences, the failures."""
    rows = []
    for run in sweep.runs:
        result = read_result(run_folder(sweep.folder, run))
        if result is None:
            result = {"label": run.label, "values": run.values, "rc": None, "metrics": {},
                      "error": "not finished (no result.json yet)"}
        rows.append(result)
    others = [k for k in sweep.options if k != SEED]
    setting = lambda r: tuple(r["values"].get(k) for k in others)  # noqa: E731
    seed_of = lambda r: r["values"].get(SEED, fixed_value(sweep.fixed, SEED) or "recipe's")  # noqa: E731
    metric_names = list(dict.fromkeys(k for r in rows for k in r["metrics"] if k.startswith("test/")))
    by_setting: dict[tuple, list[dict]] = {}
    for r in rows:
        by_setting.setdefault(setting(r), []).append(r)
    table = []
    for key, group in by_setting.items():
        entry = {"setting": dict(zip(others, key)), "seeds": [seed_of(r) for r in group], "metrics": {}}
        for m in metric_names:
            values = [r["metrics"].get(m) if r["rc"] == 0 else None for r in group]
            entry["metrics"][m] = spread(values)
        table.append(entry)
    differences = []
    for k in others:
        first = sweep.options[k][0]
        for value in sweep.options[k][1:]:
            for key, group in by_setting.items():
                where = dict(zip(others, key))
                if where[k] != value:
                    continue
                base_key = tuple(first if o == k else where[o] for o in others)
                base = {seed_of(r): r for r in by_setting.get(base_key, [])}
                for m in metric_names:
                    pairs = [(seed_of(r), r["metrics"].get(m), base[seed_of(r)]["metrics"].get(m)) for r in group
                             if r["rc"] == 0 and seed_of(r) in base and base[seed_of(r)]["rc"] == 0]
                    pairs = [p for p in pairs if p[1] is not None and p[2] is not None]
                    d = paired([p[1] for p in pairs], [p[2] for p in pairs])
                    differences.append({"option": k, "value": value, "against": first,
                                        "where": {o: v for o, v in where.items() if o != k}, "metric": m,
                                        "seeds": [p[0] for p in pairs], **d})
    failures = [{"label": r["label"], "values": r["values"], "rc": r["rc"], "error": r.get("error", "")}
                for r in rows if r["rc"] != 0]
    return {"name": sweep.name, "recipe": sweep.recipe, "command": sweep.command, "options": sweep.options,
            "fixed": sweep.fixed, "metrics": metric_names, "table": table, "differences": differences,
            "failures": failures, "runs": rows}


def show(summary: dict, folder: Path) -> str:
    lines = [f"sweep {summary['name']}: {len(summary['runs'])} run(s) of {summary['recipe']} -> {folder}/summary.json"]
    for m in summary["metrics"]:
        lines.append(f"{m}")
        for entry in summary["table"]:
            s = entry["metrics"][m]
            where = ", ".join(f"{k}={v}" for k, v in entry["setting"].items()) or "(all runs)"
            values = ", ".join("failed" if v is None else f"{v:.4g}" for v in s["values"])
            lines.append(f"  {where:<40} {fmt(s, 4):>22}   runs [{values}]")
        for d in (d for d in summary["differences"] if d["metric"] == m):
            where = "".join(f", {k}={v}" for k, v in d["where"].items())
            se = f" ± {d['se']:.4g} (se)" if d["se"] is not None else ""
            mean = "no seed where both ran" if d["mean"] is None else \
                f"{d['mean']:+.4g}{se}, paired over {len(d['diffs'])} seed(s)"
            lines.append(f"  {d['option']}={d['value']} - {d['option']}={d['against']}{where}: {mean}")
    for f in summary["failures"]:
        status = "not finished" if f["rc"] is None else f"exit status {f['rc']}"
        lines.append(f"FAILED {f['label']}: {status}: {f['error']}")
    return "\n".join(lines)


def write_summary(sweep: Sweep) -> dict:
    summary = summarise(sweep)
    (sweep.folder / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(show(summary, sweep.folder))
    return summary


def run_sweep(recipe: str, swept: dict, fixed: list[str] | None = None, parallel: int = 1, name: str | None = None,
              yes: bool = False, launcher: str = "local", slurm: dict | None = None, env: dict | None = None,
              command: str = "", retry_failed: bool = False) -> dict:
    """The sweep from Python (the benchmarks' way in): plan, validate, run, summarise; returns the summary."""
    fixed = list(fixed or [])
    command = command or shlex.join(["python", "-m", "zoo.sweep", f"recipe={recipe}", *fixed,
                                     *(f"{k}={','.join(v)}" for k, v in swept.items())])
    sweep = make_sweep(recipe, swept, fixed, parallel, name, yes, command, launcher)
    sweep.retry_failed = retry_failed
    open_folder(sweep)
    print(f"sweep {sweep.name}: {len(sweep.runs)} run(s) -> {sweep.folder}", flush=True)
    if launcher == "slurm":
        run_slurm(sweep, slurm or {}, env)
    else:
        run_local(sweep, env)
    return write_summary(sweep)


# ---------------------------------------------------------------- the command


def parser() -> CommandLineParser:
    p = CommandLineParser(prog="python -m zoo.sweep", description=(__doc__ or "").split("\n")[0],
                          formatter_class=argparse.RawDescriptionHelpFormatter,
                          epilog=(__doc__ or "").split("\n\n", 1)[-1].replace("MAX_COMBINATIONS",
                                                                               str(MAX_COMBINATIONS)))
    p.add_argument("items", nargs="*", default=[], metavar="KEY=V1,V2")
    p.add_argument("--parallel", type=int, default=1)
    p.add_argument("--yes", action="store_true")
    p.add_argument("--retry-failed", action="store_true")
    p.add_argument("--name", default=None)
    p.add_argument("--launcher", default="local", choices=LAUNCHERS)
    p.add_argument("--slurm", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--collect", default=None, metavar="FOLDER")
    return p


def slurm_options(items: list[str]) -> dict:
    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise UserError(f"--slurm {item}: write --slurm KEY=VALUE, e.g. --slurm timeout_min=120")
        with contextlib.suppress(ValueError):
            value = int(value)
        out[key] = value
    return out


def sweep_command(args: argparse.Namespace, argv: list[str]) -> int:
    if args.collect is not None:
        if args.items:
            raise UserError("--collect FOLDER takes no KEY=VALUE: it summarises the sweep that folder holds")
        summary = write_summary(load_plan(Path(args.collect)))
        return 1 if summary["failures"] else 0
    if args.parallel < 1:
        raise UserError(f"--parallel {args.parallel}: give a number of runs at once >= 1")
    recipe, swept, fixed = parse_items(args.items)
    slurm = slurm_options(args.slurm)
    if slurm and args.launcher != "slurm":
        raise UserError("--slurm KEY=VALUE sets a SLURM job's parameter: it needs --launcher slurm")
    if args.launcher == "slurm":
        require_submitit()  # before any run is planned
    command = shlex.join(["python", "-m", "zoo.sweep", *argv])
    summary = run_sweep(recipe, swept, fixed, args.parallel, args.name, args.yes, args.launcher, slurm,
                        command=command, retry_failed=args.retry_failed)
    return 1 if summary["failures"] else 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = parser().parse_intermixed_args(argv)
    except SystemExit as exit:  # argparse: --help (0) or a usage error (2, message printed)
        return int(exit.code or 0)
    return exit_status(lambda: sweep_command(args, argv))


def console() -> None:
    """The ``zoo-sweep`` console script (pyproject.toml): what ``python -m zoo.sweep`` does."""
    cli.run(main)
