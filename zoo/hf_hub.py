"""The Hugging Face Hub: a zoo model as a Hub repository, and back.

A model folder (what ``save_pretrained`` writes and ``push_to_hub`` uploads) holds three files:

- ``model.safetensors``: the weights (the model's ``state_dict``, buffers included);
- ``config.json``: the zoo's card (``zoo/pretrained/<name>.json``'s format): model name, hyper-parameters,
  data options, recipe, command, metrics with their split, and the sha256 of ``model.safetensors``,
  checked before loading; ``zoo_format`` marks it as the zoo's;
- ``README.md``: the model card for the Hub page, its metadata (YAML) naming the library, tags, dataset
  and the metrics as structured evaluation results (``model-index``).

``huggingface_hub``'s file API does the transfers (``snapshot_download`` with its cache, ``upload_folder``)
and writes the model card (``ModelCard``, ``EvalResult``); its ``ModelHubMixin`` is not used, as it rebuilds
a model from its ``__init__`` arguments saved as JSON, where the zoo rebuilds one from its card (a registry
name, then the model's options and data info). Every zoo model has ``save_pretrained``, ``push_to_hub`` and
``from_pretrained`` (``zoo.core.module.ZooModule``); ``zoo.load("hf://owner/repo")`` loads one too, from the
local cache when offline (``HF_HUB_OFFLINE=1``).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from zoo.errors import UserError
from zoo.paths import sha256
from zoo.registry import MODELS, loaded_config

WEIGHTS = "model.safetensors"
CONFIG = "config.json"
CARD = "README.md"
FORMAT = 1  # config.json's zoo_format: a later zoo that changes the folder raises it
LIBRARY = "stochastic-zoo"  # the model card's library_name: the zoo's name on PyPI
PREFIX = "hf://"  # zoo.load("hf://owner/repo")
HUB_MISSING = "the Hugging Face Hub needs the huggingface_hub package: pip install 'stochastic-zoo[hub]'"


def _hub() -> Any:
    try:
        import huggingface_hub  # imported when used: huggingface_hub
    except ImportError:
        raise UserError(HUB_MISSING) from None
    return huggingface_hub


def model_name(model: Any) -> str:
    """The registry name ``model`` is built from: the one it was loaded with, else the entry of its class,
    else its class's dotted path (which ``MODELS.get`` takes for a user's own model)."""
    info = getattr(model, "run_info", None)
    if isinstance(info, dict) and isinstance(info.get("model"), str):
        return info["model"]
    cls = type(model)
    dotted = f"{cls.__module__}:{cls.__qualname__}"
    return next((name for name in MODELS.list() if MODELS.entry(name).target == dotted), dotted)


def model_card(model: Any, name: str | None = None) -> dict:
    """The zoo card of ``model`` for its config.json: the released card it was loaded with (its metrics kept),
    else what its checkpoint's run info says (model, data, recipe, command), else its hyper-parameters alone."""
    info = getattr(model, "run_info", None) or {}
    card = dict(info.get("card") or {})
    for key in ("model", "data", "recipe", "command"):
        card.setdefault(key, info.get(key))
    card["model"] = card.get("model") or model_name(model)
    card["hyper_parameters"] = json.loads(json.dumps(dict(model.hparams), default=_not_json))  # tuples -> lists
    card["name"] = name or card.get("name") or card["model"]
    for key in ("weights", "sha256", "size_bytes"):  # of the released file: this folder's are set on saving
        card.pop(key, None)
    return card


def _not_json(value: Any) -> Any:
    raise UserError(f"the model's hyper-parameters hold a {type(value).__name__}, which config.json cannot hold: "
                    "a zoo model's options and data info are plain values (zoo.core.module)")


def save_pretrained(model: Any, folder: str | Path, name: str | None = None, repo: str | None = None) -> Path:
    """Write ``model.safetensors``, ``config.json`` and ``README.md`` into ``folder`` (made if missing);
    ``name``: the model's name on its card (default: the released entry's, else the model's); ``repo``: the
    Hub repository the model card's example loads from."""
    from safetensors.torch import save_file  # imported when used: safetensors

    _hub()  # the model card needs it: refused before anything is written
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserError(f"cannot write the model folder {folder}: {err.strerror or err}; choose another") from None
    card = model_card(model, name)
    # plain contiguous copies: safetensors refuses tensors sharing memory and views
    state = {k: v.detach().cpu().clone().contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(folder / WEIGHTS), metadata={"zoo_model": card["model"], "name": card["name"]})
    card.update(zoo_format=FORMAT, weights=WEIGHTS, sha256=sha256(folder / WEIGHTS),
                size_bytes=(folder / WEIGHTS).stat().st_size)
    (folder / CONFIG).write_text(json.dumps(card, indent=1) + "\n")
    write_model_card(card, folder / CARD, repo)
    return folder


def hub_task(model: str) -> str:
    """The Hub's task of the zoo's model ``model`` (huggingface.co/tasks), as its spec states; "other" for a model
    of a user's own."""
    spec = MODELS.builtin_spec(model)
    return spec.task if spec is not None else "other"


def write_model_card(card: dict, path: Path, repo: str | None = None) -> None:
    """README.md: YAML metadata (library, tags, dataset, metrics as model-index evaluation results) and a
    page saying what the model is and how to load it."""
    hub = _hub()
    dataset = str((card.get("data") or {}).get("name") or "unknown")
    split = card.get("metrics_split") or "test"
    metrics = {k: float(v) for k, v in sorted((card.get("metrics") or {}).items()) if isinstance(v, (int, float))}
    results = [hub.EvalResult(task_type=hub_task(card["model"]), dataset_type=dataset,
                              dataset_name=dataset, dataset_split=split, metric_type=key.split("/")[-1],
                              metric_name=key, metric_value=value) for key, value in metrics.items()]
    tags = ["zoo", card["model"]] + ([card["recipe"]] if card.get("recipe") else [])
    data = hub.ModelCardData(library_name=LIBRARY, tags=tags, model_name=card["name"], eval_results=results or None)
    recipe = f", recipe `{card['recipe']}`" if card.get("recipe") else ""
    lines = [f"# {card['name']}", card.get("description") or "",
             f"A model of [the zoo](https://pypi.org/project/{LIBRARY}/): `{card['model']}`{recipe}.",
             f"```python\nimport zoo\n\nmodel = zoo.load(\"hf://{repo or 'OWNER/REPO'}\")  # this repository\n```"]
    if card.get("command"):
        lines.append(f"Trained with `{card['command']}`.")
    if metrics:
        rows = "".join(f"| `{k}` | {v:.6g} |\n" for k, v in metrics.items())
        lines.append(f"## Metrics ({split} split)\n\n| metric | value |\n|---|---|\n{rows}")
    body = "\n\n".join(line for line in lines if line)
    hub.ModelCard(f"---\n{data.to_yaml()}\n---\n\n{body}").save(path)


def read_folder(folder: str | Path, source: str | None = None) -> tuple[dict, dict]:
    """(card, state_dict) of a model folder, its config.json checked to be the zoo's and the weights' sha256
    against it. ``source``: what the messages name (the repository, for a downloaded one)."""
    from safetensors.torch import load_file  # imported when used: safetensors

    folder = Path(folder)
    source = source or str(folder)
    config = folder / CONFIG
    if not config.is_file():
        raise UserError(f"{source} has no {CONFIG}: a zoo model folder holds {WEIGHTS}, {CONFIG} and {CARD}, "
                        "as model.save_pretrained(folder) writes them")
    try:
        card = json.loads(config.read_text())
    except (ValueError, OSError) as err:
        raise UserError(f"the model folder's {CONFIG} is not readable JSON; save the model again",
                        details=[f"folder: {source}", f"error: {err}"]) from None
    if not isinstance(card, dict) or "zoo_format" not in card or "model" not in card:
        kind = card.get("model_type") or card.get("architectures") if isinstance(card, dict) else None
        raise UserError(f"{source} is not a zoo model: its {CONFIG} has no zoo_format"
                        f"{f' (it is a {kind} config, of another library)' if kind else ''}; the zoo loads folders "
                        "written by model.save_pretrained or pushed by model.push_to_hub")
    if not isinstance(card["zoo_format"], int) or card["zoo_format"] > FORMAT:
        raise UserError(f"{source} was written by a newer zoo (zoo_format {card['zoo_format']!r}, this zoo reads "
                        f"{FORMAT}): pip install -U {LIBRARY}")
    weights = folder / WEIGHTS
    if not weights.is_file():
        raise UserError(f"{source} has no {WEIGHTS} beside its {CONFIG}: an incomplete copy or upload?")
    actual = sha256(weights)
    if actual != card.get("sha256"):
        raise UserError(f"refusing a model folder: the sha256 of its {WEIGHTS} does not match its {CONFIG}'s (changed "
                        "or damaged since it was saved); save or download it again",
                        details=[f"folder {source}", f"sha256 {actual}, its {CONFIG}'s {card.get('sha256')}"])
    try:
        state = load_file(str(weights))
    except Exception as err:  # safetensors raises its own SafetensorError, and OSError
        raise UserError(f"cannot read the model folder's {WEIGHTS}: an incomplete copy or upload? Save or download "
                        "it again", details=[f"folder: {source}", f"error: {err}"]) from None
    return card, state


def repo_id(target: str) -> str | None:
    """``owner/repo`` of ``hf://owner/repo``; None for anything else."""
    return target[len(PREFIX):].strip("/") if target.startswith(PREFIX) else None


def download(repo: str, revision: str | None = None) -> Path:
    """The local folder of the Hub repository ``repo`` (``owner/name``): downloaded into huggingface_hub's cache,
    or taken from it when offline (``HF_HUB_OFFLINE=1``) or when the Hub cannot be reached."""
    hub = _hub()
    from huggingface_hub import constants, errors  # imported when used: huggingface_hub

    if repo.count("/") != 1 or not all(repo.split("/")):
        raise UserError(f"hf://{repo}: a Hub repository is named owner/name, e.g. hf://my-user/vae-digits")
    try:
        return Path(hub.snapshot_download(repo, revision=revision, allow_patterns=[WEIGHTS, CONFIG, CARD],
                                          library_name=LIBRARY))
    except errors.LocalEntryNotFoundError:
        offline = constants.HF_HUB_OFFLINE
        why = ("HF_HUB_OFFLINE=1 is set" if offline else "the Hub cannot be reached") + " and it is not in the cache"
        raise UserError(f"cannot load hf://{repo}: {why}; download it once online (zoo.load(\"hf://{repo}\") or "
                        f"`hf download {repo}`)" + (", or unset HF_HUB_OFFLINE" if offline else ""),
                        details=[f"cache: {constants.HF_HUB_CACHE}"]) from None
    except (errors.RepositoryNotFoundError, errors.GatedRepoError, errors.RevisionNotFoundError) as err:
        raise UserError(f"cannot load hf://{repo}: {str(err).strip().splitlines()[0]} (a private repository needs "
                        "`hf auth login` or HF_TOKEN)") from None
    except (errors.HfHubHTTPError, errors.HFValidationError) as err:
        raise UserError(f"cannot load hf://{repo}: {str(err).strip().splitlines()[0]}") from None


def fetch(target: str | Path, revision: str | None = None) -> tuple[dict, dict, str]:
    """(card, state_dict, source) of a model folder or a Hub repository (``owner/repo`` or ``hf://owner/repo``)."""
    text = str(target)
    repo = repo_id(text)
    if repo is None and not Path(text).exists() and text.count("/") == 1 and not text.startswith((".", "/")):
        repo = text  # owner/repo, as huggingface_hub's from_pretrained takes it
    if repo is None:
        if not Path(text).is_dir():
            raise UserError(f"no such model folder: {text} (give a folder written by model.save_pretrained, or a "
                            "Hub repository owner/name)")
        return (*read_folder(text), text)
    return (*read_folder(download(repo, revision), f"hf://{repo}"), f"hf://{repo}")


def build(card: dict, state: dict, source: str, expected: type | None = None) -> Any:
    """The model of a card and its weights, in eval mode, with ``run_info`` as ``zoo.load`` keeps it."""
    cls = MODELS.get(card["model"])
    if expected is not None and not issubclass(cls, expected):
        raise UserError(f"{source} holds a '{card['model']}' model ({cls.__name__}), not a {expected.__name__}: "
                        f"load it with zoo.load or {cls.__name__}.from_pretrained")
    try:
        model = cls(**card["hyper_parameters"])
        model.load_state_dict(state, strict=True)
    except (TypeError, RuntimeError) as err:  # options this zoo's model lacks, or weights of another shape
        line = [s.strip() for s in str(err).strip().splitlines()] or [type(err).__name__]
        raise UserError(f"the model folder does not match this zoo's model '{card['model']}' (the first difference "
                        "below): it was written by another version of the zoo; load it with that version",
                        details=[f"from: {source}", line[min(1, len(line) - 1)]]) from None
    model.eval()
    model.run_info = {"model": card["model"], "data": card.get("data"), "recipe": card.get("recipe"),
                      "command": card.get("command"), "card": card}
    return model


def from_pretrained(target: str | Path, revision: str | None = None, expected: type | None = None,
                    trust_code: bool = False) -> Any:
    """A model from a folder written by ``save_pretrained`` or a Hub repository (``owner/repo``). Its config's
    model and estimator resolve to the zoo's own and the installed plugins; a dotted path is refused before it
    is imported unless ``trust_code`` (``zoo.registry.loaded_config``)."""
    with loaded_config(str(target), trust_code):
        card, state, source = fetch(target, revision)
        model = build(card, state, source, expected)
    model.run_info.update(loaded_from=str(target), trust_code=trust_code)  # as zoo.load keeps them
    return model


def push_to_hub(model: Any, repo: str, private: bool | None = None, token: str | None = None,
                commit_message: str = "Upload a zoo model", name: str | None = None) -> str:
    """Save ``model`` into a temporary folder and upload it to the Hub repository ``repo`` (made if missing);
    the URL of the commit."""
    hub = _hub()
    if repo.count("/") != 1 or not all(repo.split("/")):
        raise UserError(f"push_to_hub({repo!r}): a Hub repository is named owner/name")
    api = hub.HfApi(token=token)
    with tempfile.TemporaryDirectory() as tmp:
        save_pretrained(model, tmp, name or repo.split("/")[1], repo)
        api.create_repo(repo, private=private, exist_ok=True)
        return str(api.upload_folder(repo_id=repo, folder_path=tmp, commit_message=commit_message))


def is_model_folder(path: Path) -> bool:
    """A folder with a config.json, as save_pretrained writes (read_folder then says if it is not the zoo's):
    zoo.load takes it. A run folder has config.yaml."""
    return path.is_dir() and (path / CONFIG).is_file()
