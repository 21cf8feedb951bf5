"""Load finished models: ``zoo.load(name_or_path)``.

- a ``.ckpt`` written by ``python -m zoo.train`` (read with ``torch.load(weights_only=True)``);
- a model folder written by ``model.save_pretrained(folder)``, or a Hugging Face Hub repository
  ``hf://owner/repo`` (``zoo.hf_hub``; from the local cache when offline);
- a pretrained entry shipped in ``zoo/pretrained/``: ``<name>.safetensors`` (the weights) next to
  ``<name>.json`` (the card: model, hyperparameters, data, recipe, exact command, metrics with
  their split, sha256, size). The file's sha256 is checked before loading;
- an entry of the user's own, written by ``python -m zoo.pretrained export`` into ``./pretrained/`` (the
  working folder's, as ``runs/`` and ``data/``): loaded by name as the released ones, which come first.
"""

from __future__ import annotations

import dataclasses
import json
import pickle
import re
import warnings
import zipfile
from pathlib import Path
from typing import Any

from zoo import hf_hub
from zoo.errors import UserError
from zoo.paths import sha256
from zoo.registry import MODELS, closest, loaded_config

PRETRAINED_DIR = Path(__file__).resolve().parent / "pretrained"  # the released entries (in the package)
EXPORTS_DIR = Path("pretrained")  # the user's exports (zoo.pretrained export's default --out): the working folder's
CARD_KEYS = ("name", "model", "weights", "sha256")  # what makes a JSON file in EXPORTS_DIR a zoo card


def first_line(err: Exception) -> str:
    """An exception's first line for a one-line message (an empty file gives an EOFError with none)."""
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


def mismatch_line(err: RuntimeError) -> str:
    """The first specific line of load_state_dict's error (its first line only names the class)."""
    lines = [line.strip() for line in str(err).strip().splitlines()]
    return (lines[1:] or lines or [type(err).__name__])[0]


def pretrained_cards(directory: Path | None = None) -> dict[str, dict]:
    """{name: card} of every entry in ``directory`` (default: the zoo's released ones)."""
    cards = {}
    for path in sorted((directory or PRETRAINED_DIR).glob("*.json")):
        try:
            card = json.loads(path.read_text())
            cards[card["name"]] = card
        except (ValueError, KeyError, TypeError) as err:  # an edited or half-copied card
            raise UserError(f"the pretrained card {path.name} is not valid (a JSON object with 'name' expected): "
                            "restore it or remove it with its .safetensors",
                            details=[f"file: {path}", f"error: {first_line(err)}"]) from None
    return cards


def exported_cards(directory: Path | None = None) -> dict[str, dict]:
    """{name: card} of the entries exported into ``directory`` (default: ``./pretrained/``); its other files
    (another tool's JSON in a folder of that common name) are not the zoo's and are passed over."""
    directory = EXPORTS_DIR if directory is None else directory
    if not directory.is_dir() or directory.resolve() == PRETRAINED_DIR.resolve():
        return {}
    cards = {}
    for path in sorted(directory.glob("*.json")):
        try:
            card = json.loads(path.read_text())
        except (ValueError, OSError):
            continue
        if isinstance(card, dict) and all(isinstance(card.get(k), str) for k in CARD_KEYS):
            cards[card["name"]] = card
    return cards


def entries() -> dict[str, tuple[dict, Path]]:
    """{name: (card, folder)} of every entry ``zoo.load`` finds by name: the released ones, then the user's
    exports in ``./pretrained/`` (a released name is the released entry)."""
    found = {name: (card, PRETRAINED_DIR) for name, card in pretrained_cards().items()}
    for name, card in exported_cards().items():
        found.setdefault(name, (card, EXPORTS_DIR))
    return found


def read_checkpoint(path: str | Path, mmap: bool = False) -> dict:
    """A zoo checkpoint, loaded safely. ``mmap``: map the tensors instead of reading them, for checks
    that look only at the metadata and shapes (a resume reads the file again in Lightning)."""
    path = Path(path)
    is_zip = check_checkpoint_file(path)
    import torch  # imported when used, once the path's own mistakes are answered: torch

    try:
        with warnings.catch_warnings():  # torch's note on the pickle protocol of a file refused anyway
            warnings.simplefilter("ignore")
            ckpt = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap and is_zip)
    except pickle.UnpicklingError as err:
        # the object's name, and not torch's advice to retry with weights_only=False
        found = re.search(r"(?:unsupported|Unsupported global:) GLOBAL ([\w.]+)", str(err))
        what = f" ({found.group(1)})" if found else ""
        raise UserError(f"refusing the checkpoint: it holds Python objects{what} besides tensors and plain values, "
                        "which loading could run as code; pass a .ckpt written by `python -m zoo.train`",
                        details=[f"file: {path}",
                                 "the zoo loads only plain weights (torch.load weights_only=True)"]) from None
    except (RuntimeError, EOFError, zipfile.BadZipFile, ValueError, OSError) as err:  # most often cut short
        raise UserError("the checkpoint is truncated or corrupt: an interrupted copy or save? Pass a complete .ckpt "
                        "written by `python -m zoo.train`",
                        details=[f"file: {path}", f"error: {first_line(err)}"]) from None
    if not isinstance(ckpt, dict) or "zoo" not in ckpt or "state_dict" not in ckpt:
        raise UserError(f"{path} is not a zoo checkpoint (no 'zoo' section): only checkpoints written by "
                        "`python -m zoo.train` can be loaded")
    return ckpt


def check_checkpoint_file(path: Path) -> bool:
    """A checkpoint path's mistakes (a folder, no file, not a PyTorch file), found without torch; True for
    torch.save's zip format, False for its older plain pickle one."""
    if path.is_dir():
        raise not_a_checkpoint(path)
    if not path.is_file():
        raise UserError(f"checkpoint not found: {path}")
    with open(path, "rb") as f:
        head = f.read(2)
    is_zip = head == b"PK"  # torch.save's format; b"\x80" opens its older plain pickle one
    if not is_zip and head[:1] != b"\x80":
        what = "empty" if not head else "neither a zip archive nor a pickle, as torch.save writes"
        raise UserError(f"the checkpoint is corrupt or not a PyTorch file (it is {what}); "
                        "pass a .ckpt written by `python -m zoo.train`", details=[f"file: {path}"])
    return is_zip


def not_a_checkpoint(folder: Path) -> UserError:
    """A folder given where a checkpoint file is expected (a run folder, say): name the newest
    checkpoint inside it, if any."""
    found = [*folder.glob("checkpoints/last.ckpt"), *folder.glob("*/checkpoints/last.ckpt")]
    hint = (f"e.g. {max(found, key=lambda p: p.stat().st_mtime)}" if found
            else "written by `python -m zoo.train` (<run folder>/checkpoints/last.ckpt)")
    return UserError(f"{folder} is a folder, not a checkpoint: pass a .ckpt file, {hint}")


def build_model(model_name: str, hparams: dict, state_dict: dict, source: str) -> Any:
    cls = MODELS.get(model_name)
    config = getattr(cls, "Config", None)
    saved = hparams.get("cfg") if isinstance(hparams, dict) else None
    if config is not None and isinstance(saved, dict):  # an option the model lacks: named, with the closest one

        known = [f.name for f in dataclasses.fields(config)]
        unknown = [k for k in saved if k not in known]
        if unknown:
            hints = "".join(closest(k, known) for k in unknown[:1])
            shown = ", ".join(map(repr, unknown[:3])) + (" ..." if len(unknown) > 3 else "")
            raise UserError(f"{Path(source).name} holds option{'s' * (len(unknown) > 1)} {shown} that model "
                            f"'{model_name}' no longer has{hints}: it was written by another version of the zoo; load "
                            "it with that version, or retrain",
                            details=[f"from: {source}", *([f"all of them: {', '.join(unknown)}"] if len(unknown) > 3
                                                          else [])])
    model = cls(**hparams)
    try:
        model.load_state_dict(state_dict, strict=True)
    except RuntimeError as err:
        raise UserError(f"the weights do not match model '{model_name}' (the first difference below): they were "
                        "written for another version of it; load them with that version, or retrain",
                        details=[f"from: {source}", mismatch_line(err)]) from None
    model.eval()
    return model


def load_checkpoint(path: str | Path) -> tuple[Any, dict]:
    """Model and the run info (model name, data options, recipe, command) from a .ckpt."""
    ckpt = read_checkpoint(path)
    info = ckpt["zoo"]
    return with_info(build_model(info["model"], ckpt["hyper_parameters"], ckpt["state_dict"], str(path)), info)


def find_entry(name: str) -> tuple[dict, Path]:
    """(card, folder) of the pretrained entry ``name``; an unknown name is a UserError (no torch needed)."""
    found = entries()
    if name not in found:
        raise UserError(f"unknown pretrained model '{name}'{closest(name, list(found))}: name one below "
                        "(python -m zoo.pretrained lists them)", details=[f"Available: {', '.join(found) or 'none'}"])
    return found[name]


def load_pretrained(name: str) -> tuple[Any, dict]:
    card, folder = find_entry(name)
    from safetensors.torch import load_file  # imported when used: safetensors

    weights = folder / card["weights"]
    if not weights.is_file():
        raise UserError(f"weights file of '{name}' is missing: {weights}")
    actual = sha256(weights)
    if actual != card["sha256"]:
        if folder != PRETRAINED_DIR:
            raise UserError(f"refusing {weights}: its sha256 does not match its card's, so the file was changed or "
                            "damaged after it was exported; export it again (--replace)",
                            details=[f"sha256 {actual}, its card's {card['sha256']}"])
        raise UserError(f"refusing the weights of '{name}': their sha256 does not match the card's, so the file was "
                        "changed or damaged since its release. Restore the released file, or reinstall the zoo",
                        details=[f"file {weights}", f"sha256 {actual}, its card's {card['sha256']}",
                                 f"in a git clone of the zoo: git checkout -- {weights}"])
    try:
        state = load_file(str(weights))
    except Exception as err:
        raise UserError(f"cannot read the weights {weights.name}: restore the file (or reinstall the zoo)",
                        details=[f"file: {weights}", f"error: {err}"]) from None
    model = build_model(card["model"], card["hyper_parameters"], state, str(weights))
    return with_info(model, card_info(card))


def card_info(card: dict) -> dict:
    """The run info of a model loaded from a card (a released entry's, or a Hub folder's config.json)."""
    return {"model": card["model"], "data": card.get("data"), "recipe": card.get("recipe"),
            "command": card.get("command"), "card": card}


def load_hf(target: str) -> tuple[Any, dict]:
    """A model folder written by ``save_pretrained``, or the Hub repository ``hf://owner/repo`` (zoo.hf_hub)."""
    card, state, source = hf_hub.fetch(target)
    return with_info(build_model(card["model"], card["hyper_parameters"], state, source), card_info(card))


def with_info(model: Any, info: dict) -> tuple[Any, dict]:
    """(model, info), the info also kept as ``model.run_info``: the data options it was trained with, for
    the inference methods that need its data (the OOD model fitting a threshold its checkpoint lacks)."""
    model.run_info = info
    return model, info


def load_any(target: str, trust_code: bool = False) -> tuple[Any, dict]:
    """(model, run info) of a pretrained name, a checkpoint path, a model folder or ``hf://owner/repo``. The names
    its file states (model, estimator) resolve to the zoo's own and the installed plugins only; a dotted path is
    refused before it is imported unless ``trust_code`` (``zoo.registry.loaded_config``). The run info keeps both
    (``loaded_from``, ``trust_code``) for the names a model looks up later (the OOD model's datamodule)."""
    with loaded_config(str(target), trust_code):
        model, info = _load_any(target)
    info.update(loaded_from=str(target), trust_code=trust_code)
    return model, info


def locate(target: str | Path) -> tuple[str, str]:
    """What ``target`` names: ("hf", a model folder or hf://owner/repo), ("checkpoint", a .ckpt path) or
    ("pretrained", an entry's name). Every mistake in it (empty, no such file or entry, a folder, a card's file,
    a file that is not a checkpoint) is a UserError found without torch: the commands answer it at once."""
    if isinstance(target, Path):
        target = str(target)
    if not isinstance(target, str) or not target.strip():
        got = "an empty name" if isinstance(target, str) else f"{type(target).__name__} {target!r}"
        raise UserError(f"nothing to load ({got}): give a pretrained name ({', '.join(entries()) or 'none'}) "
                        "or the path of a .ckpt written by `python -m zoo.train`")
    path = Path(target)
    if target.startswith(hf_hub.PREFIX) or hf_hub.is_model_folder(path):
        return "hf", target
    if path.suffix in (".json", ".safetensors") and path.is_file():  # a card's own file: named as its entry
        raise entry_file(path)
    if target.endswith(".ckpt") or path.is_file():
        check_checkpoint_file(path)
        return "checkpoint", target
    if path.is_dir() and ("/" in target or target not in entries()):
        raise not_a_checkpoint(path)
    if "/" in target or target.endswith((".ckpt", ".safetensors")):
        raise UserError(f"no such file: {target}")
    find_entry(target)
    return "pretrained", target


def _load_any(target: str) -> tuple[Any, dict]:
    kind, target = locate(target)
    if kind == "hf":
        return load_hf(target)
    if kind == "checkpoint":
        return load_checkpoint(target)
    return load_pretrained(target)


def entry_file(path: Path) -> UserError:
    """A pretrained entry's card (.json) or weights (.safetensors) given as a path: entries are loaded
    by name (the card names its weights and their sha256)."""
    name = path.stem
    if path.suffix == ".json":
        try:
            name = str(json.loads(path.read_text())["name"])
        except (ValueError, OSError, KeyError, TypeError):
            pass
    cards = entries()
    if name in cards:
        return UserError(f"{path} is the pretrained {'card' if path.suffix == '.json' else 'weights'} of "
                         f"'{name}': give its name, {name} (python -m zoo.pretrained lists the entries)")
    return UserError(f"{path.name} is not a checkpoint nor a pretrained entry: pass a .ckpt written by "
                     "`python -m zoo.train` or a pretrained name (below)",
                     details=[f"file: {path}", f"pretrained names: {', '.join(cards) or 'none'}"])


def load(target: str, trust_code: bool = False) -> Any:
    """A ready-to-use model (eval mode, CPU) from a pretrained name, a checkpoint path, a model folder or
    ``hf://owner/repo``; ``trust_code``: import the modules its file names by dotted path."""
    return load_any(target, trust_code)[0]


def transforms(name_or_path: str, trust_code: bool = False) -> Any:
    """``zoo.transforms``: the card's input transforms (no weights loaded), else the loaded model's."""
    from zoo.core.transforms import (
        ImageTransforms,  # imported when used: torch (zoo.loading lists the cards without it)
    )

    card = entries().get(name_or_path, (None,))[0] if isinstance(name_or_path, str) else None
    if card and card.get("transforms"):
        return ImageTransforms.from_dict(card["transforms"])
    model = load(name_or_path, trust_code)
    if not hasattr(model, "transforms"):
        raise UserError(f"{name_or_path} is a {type(model).__name__}, which takes no pictures: it has no image "
                        "transforms (the image models: vae, ood, sat)")
    return model.transforms()
