"""python -m zoo.pretrained                       list entries with their metrics
python -m zoo.pretrained export CKPT --name NAME [--description TEXT] [key=value ...]
    evaluate the checkpoint on its test split (key=value as for zoo.evaluate) and write
    zoo/pretrained/NAME.safetensors + NAME.json (the card)."""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

from zoo.errors import UserError


def list_entries() -> str:
    from zoo.hub import pretrained_cards

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


def export(ckpt_path: str, name: str, description: str, options: dict, out_dir: Path | None = None) -> Path:
    from safetensors.torch import save_file

    import zoo
    from zoo.evaluate import evaluate
    from zoo.hub import PRETRAINED_DIR, read_checkpoint, sha256

    ckpt = read_checkpoint(ckpt_path)
    info = ckpt["zoo"]
    metrics = evaluate(ckpt_path, options)
    out_dir = out_dir or PRETRAINED_DIR
    weights = out_dir / f"{name}.safetensors"
    state = {k: v.detach().clone().contiguous() for k, v in ckpt["state_dict"].items()}
    save_file(state, str(weights), metadata={"zoo_model": info["model"], "name": name})
    card = {
        "name": name, "description": description, "model": info["model"],
        "hyper_parameters": ckpt["hyper_parameters"], "data": info["data"], "recipe": info["recipe"],
        "command": portable_command(info["command"]), "seed": info["config"]["seed"],
        "trained_steps": ckpt.get("global_step"),
        # which checkpoint of the run was exported (last.ckpt or best-<epoch>-<step>.ckpt)
        "checkpoint": {"file": Path(ckpt_path).name, "epoch": ckpt.get("epoch"), "step": ckpt.get("global_step")},
        "metrics": metrics, "metrics_split": "test", "evaluate": f"python -m zoo.evaluate {name} --json",
        "weights": weights.name, "sha256": sha256(weights), "size_bytes": weights.stat().st_size,
        "created": time.strftime("%Y-%m-%d"), "zoo_version": zoo.__version__,
    }
    (out_dir / f"{name}.json").write_text(json.dumps(card, indent=1) + "\n")
    return weights


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        if not argv or argv[0] == "list":
            print(list_entries())
            return 0
        if argv[0] in ("-h", "--help"):
            print(__doc__)
            return 0
        if argv[0] != "export" or len(argv) < 2:
            raise UserError("usage: python -m zoo.pretrained [list | export CKPT --name NAME]")
        from zoo.evaluate import parse_kv

        rest, name, description, kv = argv[2:], None, "", []
        while rest:
            arg = rest.pop(0)
            if arg == "--name" and rest:
                name = rest.pop(0)
            elif arg == "--description" and rest:
                description = rest.pop(0)
            else:
                kv.append(arg)
        if not name:
            raise UserError("export needs --name NAME")
        path = export(argv[1], name, description, parse_kv(kv))
        print(f"wrote {path} and {path.with_suffix('.json')}")
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
