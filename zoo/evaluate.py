"""python -m zoo.evaluate TARGET [key=value ...] [--json]

TARGET is a checkpoint path or a pretrained name. Rebuilds the model's datamodule (the data
options stored with the model, overridable with data.KEY=VALUE), runs the test split and prints
every ``test/*`` metric as a table (or one JSON object with --json).

  data.root=PATH        where the data lives (any data option can be overridden)
  trainer.KEY=VALUE     lightning.Trainer arguments (e.g. trainer.limit_test_batches=10)
  seed=N                seed for stochastic metrics (default: the run's seed)
  plots_dir=PATH        where the model writes its test figures (default: not kept)
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from zoo.errors import UserError


def parse_kv(items: list[str]) -> dict[str, Any]:
    import yaml

    out = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise UserError(f"malformed argument '{item}': write key=value")
        try:
            out[key] = yaml.safe_load(value) if value else ""
        except yaml.YAMLError:
            out[key] = value
    return out


def evaluate(target: str, options: dict[str, Any] | None = None) -> dict[str, float]:
    import lightning as L

    from zoo.config import validate_options
    from zoo.hub import load_any
    from zoo.registry import DATAMODULES

    options = dict(options or {})
    model, info = load_any(target)
    data_cfg = dict(info["data"])
    trainer_opts = {"logger": False, "enable_checkpointing": False, "enable_progress_bar": False,
                    "enable_model_summary": False}
    seed = info.get("config", {}).get("seed", info.get("card", {}).get("seed", 0))
    plots_dir = None
    for key, value in options.items():
        if key.startswith("data."):
            data_cfg[key[5:]] = value
        elif key.startswith("trainer."):
            trainer_opts[key[8:]] = value
        elif key == "seed":
            seed = int(value)
        elif key == "plots_dir":
            plots_dir = Path(value)
        else:
            raise UserError(f"unknown option '{key}' for zoo.evaluate: use data.KEY=, trainer.KEY=, seed=, plots_dir=")
    name = data_cfg.pop("name")
    entry = DATAMODULES.entry(name)
    opts = validate_options(entry.config, data_cfg, f"data options of {target}") if entry.config else data_cfg
    datamodule = entry.obj(opts)
    datamodule.prepare_data()
    datamodule.setup("test")
    L.seed_everything(seed, verbose=False)
    with tempfile.TemporaryDirectory() as tmp:
        model.plots_dir = plots_dir or Path(tmp)
        try:
            from zoo.tracking import quiet_lightning

            quiet_lightning()
            trainer = L.Trainer(**trainer_opts)
        except (TypeError, ValueError) as err:
            raise UserError(f"invalid trainer option: {err}") from None
        results = trainer.test(model, datamodule=datamodule, verbose=False)
    return {k: float(v) for k, v in (results[0] if results else {}).items()}


def format_table(metrics: dict[str, float]) -> str:
    width = max((len(k) for k in metrics), default=6)
    lines = [f"{'metric':<{width}}  value", f"{'-' * width}  ---------"]
    lines += [f"{k:<{width}}  {v:.4f}" for k, v in sorted(metrics.items())]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    as_json = "--json" in argv
    rest = [a for a in argv if a != "--json"]
    try:
        flags = [a for a in rest if a.startswith("-")]
        if flags:
            raise UserError(f"unknown flag '{flags[0]}' (only --json)")
        metrics = evaluate(rest[0], parse_kv(rest[1:]))
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(json.dumps(metrics) if as_json else format_table(metrics))
    return 0


if __name__ == "__main__":
    sys.exit(main())
