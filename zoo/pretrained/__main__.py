"""python -m zoo.pretrained [--all | --json]      list entries with their headline metrics (--all: every metric;
                                                 --json: the cards' metrics as one JSON object)
python -m zoo.pretrained export CKPT --name NAME [--out FOLDER] [--description TEXT] [--replace] [--trust-code]
                                [key=value ...]
    evaluate the checkpoint on its test split (key=value as for zoo.evaluate) and write
    FOLDER/NAME.safetensors + NAME.json (the card). FOLDER defaults to ./pretrained (the working folder's, as
    runs/ and data/), where zoo.load("NAME") and zoo.evaluate / zoo.predict NAME find it; the released
    entries are in the package's zoo/pretrained/ (--out zoo/pretrained in a clone, to release one)."""

from __future__ import annotations

import json
import re
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import zoo
from zoo import cli, loading
from zoo.cli import CommandLineParser, exit_status
from zoo.core.files import atomic_path
from zoo.errors import UserError
from zoo.evaluate import evaluate
from zoo.loading import (
    EXPORTS_DIR,
    build_model,
    check_checkpoint_file,
    entries,
    pretrained_cards,
    read_checkpoint,
)
from zoo.paths import make_folder, sha256
from zoo.registry import loaded_config
from zoo.schema import parse_kv

# each model's headline test metrics (the README's Results table), in this order, those a card has; a card's
# own "headline" list comes first
HEADLINES = {
    "vae": ["test/loss"],  # -ELBO, nats
    "dvae": ["test/loss"],  # -ELBO, nats
    "sat": ["test/bleu4", "test/att_localisation"],
    "seqgan": ["test/nll_oracle", "test/nll_oracle_mle"],  # NLL-oracle, and the MLE start's
    "skipgram": ["test/planted_spearman"],  # Spearman against the planted similarities
    "ood": ["test/acc", "test/uniform/msp/tnr95"],  # accuracy, TNR at TPR 95% on uniform noise
    "maml": ["test/loss_1", "test/loss_10"],  # MSE after 1 and 10 adaptation steps
}
HEADLINE_FALLBACK = 3  # metrics shown for a model without a headline (a plugin's): the first ones, sorted


def headline(card: dict) -> list[str]:
    """The names of a card's headline metrics: its own "headline" list, else its model's (``HEADLINES``), else
    its first few metrics."""
    metrics = card.get("metrics") or {}
    wanted = card.get("headline") or HEADLINES.get(card.get("model"), [])
    chosen = [k for k in wanted if k in metrics]
    return chosen or sorted(metrics)[:HEADLINE_FALLBACK]


def list_entries(every_metric: bool = False) -> str:
    lines = []
    for name, (card, folder) in entries().items():
        metrics = card.get("metrics") or {}
        shown = sorted(metrics) if every_metric else headline(card)
        values = ", ".join(f"{k}={metrics[k]:.4g}" for k in shown)
        more = len(metrics) - len(shown)
        rest = f" (+{more} more: --all)" if more else ""
        where = "" if folder == loading.PRETRAINED_DIR else f", exported into {folder}/"
        size = f"{card['size_bytes'] / 1e6:.2f} MB"
        lines.append(f"{name}  [{card['model']}, recipe {card.get('recipe')}, {size}{where}]\n"
                     f"    {card.get('description', '')}\n    {card.get('metrics_split', 'test')}: {values}{rest}")
    return "\n".join(lines) or "no pretrained entries"


def entries_json() -> str:
    """Every entry's model, recipe, folder, headline and metrics, as one JSON object keyed by name."""
    return json.dumps({name: {"model": card["model"], "recipe": card.get("recipe"), "folder": str(folder),
                              "description": card.get("description", ""), "headline": headline(card),
                              "metrics_split": card.get("metrics_split", "test"), "metrics": card.get("metrics", {})}
                       for name, (card, folder) in entries().items()}, indent=1)


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
           replace: bool = False, trust_code: bool = False) -> Path:
    """Evaluate ``ckpt_path`` and write ``out_dir/<name>.safetensors`` and its card ``<name>.json`` (``out_dir``:
    ``./pretrained/`` by default, where ``zoo.load(name)`` finds it). ``trust_code``: import the modules the
    checkpoint names by dotted path."""
    check_entry_name(name)
    out_dir = Path(EXPORTS_DIR if out_dir is None else out_dir)
    if (out_dir / f"{name}.json").exists() and not replace:  # a released card is not overwritten by a typo
        raise UserError(f"entry '{name}' exists ({out_dir / name}.json): choose another --name, or add --replace "
                        "to overwrite it")
    if name in pretrained_cards() and out_dir.resolve() != loading.PRETRAINED_DIR.resolve():
        raise UserError(f"'{name}' is the name of a released entry, which zoo.load(\"{name}\") loads before an "
                        "export of that name: choose another --name")
    if not Path(ckpt_path).exists():  # a mistyped path: answered before a folder is made or torch imported
        check_checkpoint_file(Path(ckpt_path))
    make_folder(out_dir, instead="choose another --out")  # safetensors fails only at the end
    check_checkpoint_file(Path(ckpt_path))  # a folder, an empty or a foreign file: still before torch
    from safetensors.torch import save_file  # imported when used, once the arguments are checked: safetensors, torch

    ckpt = read_checkpoint(ckpt_path)
    info = ckpt["zoo"]
    metrics = evaluate(ckpt_path, options, trust_code=trust_code)
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
        with loaded_config(ckpt_path, trust_code):
            transforms = image_transforms(info["model"], ckpt)
        if transforms is not None:  # what a user's picture goes through: zoo.transforms(name), model.preprocess
            card["transforms"] = transforms
        known = {**{n: card for n, (card, _) in entries().items()}, **pretrained_cards(out_dir)}
        sources = card_sources(ckpt["hyper_parameters"].get("cfg", {}), name, known)
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
    listing = sub.add_parser("list", help="entries with their headline metrics (the default)")
    for p in (parser, listing):
        shown = p.add_mutually_exclusive_group()
        shown.add_argument("--all", action="store_true", help="every metric of each entry, not only its headline")
        shown.add_argument("--json", action="store_true", help="the entries and all their metrics as one JSON object")
    exp = CommandLineParser(prog="python -m zoo.pretrained export",
                            description="evaluate a checkpoint and write NAME.safetensors + NAME.json")
    sub.add_parser("export", help=exp.description, add_help=False)
    exp.add_argument("ckpt", help="the checkpoint to export (e.g. RUN/checkpoints/last.ckpt)")
    exp.add_argument("--name", required=True, help="the entry's name, e.g. vae-digits")
    exp.add_argument("--description", default="", help="one line shown by list")
    exp.add_argument("--out", default=str(EXPORTS_DIR), metavar="FOLDER",
                     help="where the entry is written (default: ./pretrained, where zoo.load finds it by name)")
    exp.add_argument("--replace", action="store_true", help="overwrite an entry of that name")
    exp.add_argument("--trust-code", action="store_true",
                     help="import the modules the checkpoint names by dotted path (its author's code)")
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
            print(entries_json() if args.json else list_entries(every_metric=args.all))
            return 0

        path = export(args.ckpt, args.name, args.description, parse_kv(args.overrides), out_dir=Path(args.out),
                      replace=args.replace, trust_code=args.trust_code)
        print(f"wrote {path} and {path.with_suffix('.json')}")
        return 0

    return exit_status(run)


def console() -> None:
    """The ``zoo-pretrained`` console script (pyproject.toml): what ``python -m zoo.pretrained`` does."""
    cli.run(main)


if __name__ == "__main__":
    cli.run(main)
