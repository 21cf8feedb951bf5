"""Issue 15's diagnosis of a shapes captioning checkpoint: is it the weights or BatchNorm's statistics?

    python studies/sat_diagnose.py RUN/checkpoints/last.ckpt [MORE.ckpt ...] [--out FILE.json] [--device cuda]

For each checkpoint, on the 200 validation scenes of its data options (one torch thread):
- the validation metrics as saved, and again after the encoder's BatchNorm statistics are
  recomputed over the training split with the checkpoint's weights (a cumulative average,
  instead of the running average of the last ~10 training batches that the checkpoint holds);
- how often the greedy captions name each colour, against the first reference of each scene
  (a model that reads colours badly over- and under-uses some);
- the dead units (never positive on the validation scenes) after each ReLU of the CNN.
Prints one JSON object per checkpoint; --out writes them all (docs/captioning.md, seeds).
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

import lightning as L
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's zoo and helpers, not an installed zoo
from benchmarks.common.devices import accelerator, add_device_option, processor, resolve_device
from zoo.loading import load_any
from zoo.models.captioning.data import ShapesData

COLOURS = ["red", "green", "blue", "yellow", "purple"]


def validate(model, dm: ShapesData) -> dict:
    acc, devices = accelerator(model.device)
    trainer = L.Trainer(accelerator=acc, devices=devices, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    return {k: round(float(v), 4) for k, v in trainer.validate(model, dm.val_dataloader(), verbose=False)[0].items()}


@torch.no_grad()
def recompute_batchnorm(model, dm: ShapesData) -> None:
    """Every BatchNorm's statistics from scratch: the mean over all training batches (momentum None)."""
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.reset_running_stats()
            m.momentum = None
    model.train()
    for batch in dm.train_dataloader():
        model.encode(batch["image"].to(model.device))
    model.eval()


@torch.no_grad()
def colour_counts(model, dm: ShapesData) -> dict:
    gen, ref = collections.Counter(), collections.Counter()
    for batch in dm.val_dataloader():
        res, _, _ = model.generate(batch["image"].to(model.device))
        for seq, refs in zip(res.sequences[:, 0].tolist(), batch["refs"]):
            gen.update(w for w in model.vocab.decode(seq).split() if w in COLOURS)
            ref.update(w for w in refs[0].split() if w in COLOURS)
    return {c: {"generated": gen[c], "first_reference": ref[c]} for c in COLOURS}


@torch.no_grad()
def dead_units(model, dm: ShapesData) -> list[str]:
    """'dead/total' channels after each ReLU of the shapes CNN on the first validation batch."""
    x = next(iter(dm.val_dataloader()))["image"].to(model.device)
    B, _, H, W = x.shape
    ys = torch.linspace(-1, 1, H, device=x.device).view(1, 1, H, 1).expand(B, 1, H, W)  # coordinate channels
    xs = torch.linspace(-1, 1, W, device=x.device).view(1, 1, 1, W).expand(B, 1, H, W)
    h, out = torch.cat([x, xs, ys], 1), []
    for layer in model.encoder.net:
        h = layer(h)
        if isinstance(layer, torch.nn.ReLU):
            active = (h > 0).float().mean((0, 2, 3))  # (C,) fraction of positions where it fires
            out.append(f"{int((active == 0).sum())}/{active.numel()}")
    return out


def diagnose(ckpt: str, device: torch.device) -> dict:
    model, info = load_any(ckpt)
    model = model.to(device)
    data = {k: v for k, v in info["data"].items() if k != "name"}
    dm = ShapesData(data)
    dm.setup()
    row = {"checkpoint": ckpt, "val_as_saved": validate(model, dm), "colours": colour_counts(model, dm),
           "dead_units_after_each_relu": dead_units(model, dm)}
    recompute_batchnorm(model, dm)
    row["val_batchnorm_recomputed"] = validate(model, dm)
    return row


def main() -> None:
    from zoo.tracking import quiet_lightning

    quiet_lightning()  # the Trainers built here: no cloud tip, no LeafSpec warning
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("checkpoints", nargs="+")
    ap.add_argument("--out", help="write every row to this JSON file")
    add_device_option(ap)
    args = ap.parse_args()
    device = resolve_device(args.device)
    torch.set_num_threads(1)
    rows = []
    for ckpt in args.checkpoints:
        rows.append(diagnose(ckpt, device))
        print(json.dumps(rows[-1]), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"command": "python studies/sat_diagnose.py " + " ".join(args.checkpoints),
                       "device": str(device), "machine": processor(), "rows": rows}, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
