"""python -m zoo.pretrained                       list entries with their metrics
python -m zoo.pretrained export CKPT --name NAME [--description TEXT] [--replace] [key=value ...]
    evaluate the checkpoint on its test split (key=value as for zoo.evaluate) and write
    zoo/pretrained/NAME.safetensors + NAME.json (the card)."""

from __future__ import annotations

import json
import re
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import zoo
from zoo import cli
from zoo.cli import CommandLineParser, exit_status
from zoo.core.files import atomic_path
from zoo.errors import UserError
from zoo.evaluate import evaluate
from zoo.hub import PRETRAINED_DIR, build_model, pretrained_cards, read_checkpoint, sha256
from zoo.options import parse_kv
from zoo.paths import make_folder


def list_entries() -> str:
    lines = []
    for name, card in pretrained_cards().items():
        metrics = ", ".join(f"{k}={v:.4g}" for k, v in sorted(card["metrics"].items()))
        lines.append(f"{name}  [{card['model']}, recipe {card['recipe']}, {card['size_bytes'] / 1e6:.2f} MB]\n"
                     f"    {card.get('description', '')}\n    {card['metrics_split']}: {metrics}")
    return "\n".join(lines) or "no pretrained entries"


MACHINE_SPECIFIC = ("run_dir=",)  # overrides that name a folder of the machine that trained the model


def portable_command(command: str) -> str:
    """The training command without the overrides that only make sense on the exporting machine
    (``run_dir=...``), so a card's command runs anywhere."""
    return shlex.join(a for a in shlex.split(command) if not a.startswith(MACHINE_SPECIFIC))


ENTRY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # no path separator: a file stem in zoo/pretrained/
RESERVED_SUFFIXES = (".ckpt", ".safetensors", ".json")  # names ending so are taken for file paths


def check_entry_name(name: str) -> None:
    """An entry's name is a file stem in zoo/pretrained/: '' would write a hidden '.json' file, and a
    name with '/' or '..' a path outside it (or a traceback from safetensors). A name ending in a file
    extension of the zoo's (vae.ckpt) would write vae.ckpt.json, an entry `zoo.predict vae.ckpt` takes
    for a checkpoint path and never finds."""
    if not ENTRY_NAME.fullmatch(name):
        raise UserError(f"--name {name!r} cannot name an entry: use letters, digits, '.', '_' and '-', "
                        "starting with a letter or digit (e.g. vae-digits)")
    suffix = next((s for s in RESERVED_SUFFIXES if name.lower().endswith(s)), None)
    if suffix is not None:
        raise UserError(f"--name {name!r} cannot name an entry: a name ending in {suffix} is read as a file "
                        f"path, so the entry could never be loaded; drop the extension (--name "
                        f"{name[:-len(suffix)] or 'vae-digits'})")


def card_sources(cfg: Any, name: str, cards: dict[str, dict]) -> dict[str, str]:
    """{card name: its sha256} for every other card of ``cards`` a model option names
    (``encoder_from: sat-shapes-soft``), found anywhere in the (nested) config."""
    if isinstance(cfg, dict):
        cfg = list(cfg.values())
    if isinstance(cfg, (list, tuple)):
        return {k: v for value in cfg for k, v in card_sources(value, name, cards).items()}
    if isinstance(cfg, str) and cfg != name and cfg in cards:
        return {cfg: cards[cfg]["sha256"]}
    return {}


def export(ckpt_path: str, name: str, description: str, options: dict, out_dir: Path | None = None,
           replace: bool = False) -> Path:
    from safetensors.torch import save_file  # imported when used: safetensors

    check_entry_name(name)
    out_dir = out_dir or PRETRAINED_DIR
    if (out_dir / f"{name}.json").exists() and not replace:  # a released card is not overwritten by a typo
        raise UserError(f"entry '{name}' exists ({out_dir / name}.json): choose another --name, or add --replace "
                        "to overwrite it")
    make_folder(out_dir, instead="export from a copy of the zoo you may write in")  # safetensors fails only at the end
    ckpt = read_checkpoint(ckpt_path)
    info = ckpt["zoo"]
    metrics = evaluate(ckpt_path, options)
    weights, card_path = out_dir / f"{name}.safetensors", out_dir / f"{name}.json"
    state = {k: v.detach().clone().contiguous() for k, v in ckpt["state_dict"].items()}
    # both written beside their names and renamed at the end, the weights first: a kill or a full disk
    # leaves the old entry (or none), not a card whose hash its weights do not match
    with atomic_path(card_path) as card_tmp, atomic_path(weights) as weights_tmp:
        save_file(state, str(weights_tmp), metadata={"zoo_model": info["model"], "name": name})
        card = {
            "name": name, "description": description, "model": info["model"],
            "hyper_parameters": ckpt["hyper_parameters"], "data": info["data"], "recipe": info["recipe"],
            "command": portable_command(info["command"]), "seed": info["config"]["seed"],
            "trained_steps": ckpt.get("global_step"),
            # which checkpoint of the run was exported (last.ckpt or best-<epoch>-<step>.ckpt)
            "checkpoint": {"file": Path(ckpt_path).name, "epoch": ckpt.get("epoch"), "step": ckpt.get("global_step")},
            "metrics": metrics, "metrics_split": "test", "evaluate": f"python -m zoo.evaluate {name} --json",
            "weights": weights.name, "sha256": sha256(weights_tmp), "size_bytes": weights_tmp.stat().st_size,
            "created": time.strftime("%Y-%m-%d"), "zoo_version": zoo.__version__,
        }
        transforms = image_transforms(info["model"], ckpt)
        if transforms is not None:  # what a user's picture goes through: zoo.transforms(name), model.preprocess
            card["transforms"] = transforms
        sources = card_sources(ckpt["hyper_parameters"].get("cfg", {}), name, pretrained_cards(out_dir))
        if sources:  # other cards this one was trained from: re-exporting them changes what its recipe gives
            card["sources"] = sources
        card_tmp.write_text(json.dumps(card, indent=1) + "\n")
    return weights


def image_transforms(model_name: str, ckpt: dict) -> dict | None:
    """The card's ``transforms`` of an image model (derived from its config by its ``transforms()``); None
    for a model that takes no pictures."""
    model = build_model(model_name, ckpt["hyper_parameters"], ckpt["state_dict"], model_name)
    if not hasattr(model, "transforms"):
        return None
    try:
        return model.transforms().to_dict()
    except UserError:  # a model of points (the OOD toy)
        return None


def main(argv: list[str] | None = None) -> int:

    argv = sys.argv[1:] if argv is None else argv
    parser = CommandLineParser(prog="python -m zoo.pretrained", description="pretrained entries: list, export")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("list", help="entries with their metrics (the default)")
    exp = CommandLineParser(prog="python -m zoo.pretrained export",
                            description="evaluate a checkpoint and write NAME.safetensors + NAME.json")
    sub.add_parser("export", help=exp.description, add_help=False)
    exp.add_argument("ckpt", help="the checkpoint to export (e.g. RUN/checkpoints/last.ckpt)")
    exp.add_argument("--name", required=True, help="the entry's name, e.g. vae-digits")
    exp.add_argument("--description", default="", help="one line shown by list")
    exp.add_argument("--replace", action="store_true", help="overwrite an entry of that name")
    exp.add_argument("overrides", nargs="*", metavar="key=value", help="evaluation options, as for zoo.evaluate")
    try:  # argparse cannot mix sub-commands with intermixed positionals: export has its own parser
        if argv and argv[0] == "export":
            args = exp.parse_intermixed_args(argv[1:])
        else:
            args = parser.parse_args(argv)
    except SystemExit as exit:  # --help (0) or a usage error (2, message printed)
        return int(exit.code or 0)

    def run() -> int:
        if argv[:1] != ["export"]:
            print(list_entries())
            return 0

        path = export(args.ckpt, args.name, args.description, parse_kv(args.overrides), replace=args.replace)
        print(f"wrote {path} and {path.with_suffix('.json')}")
        return 0

    return exit_status(run)


def console() -> None:
    """The ``zoo-pretrained`` console script (pyproject.toml): what ``python -m zoo.pretrained`` does."""
    cli.run(main)


if __name__ == "__main__":
    cli.run(main)
