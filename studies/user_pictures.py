"""Issue 62's probe: the released image models on pictures as users bring them, before and after the card's
transforms (studies/2026-11-29-user-pictures.md).

    OMP_NUM_THREADS=1 python studies/user_pictures.py [FILE]   # -> studies/results/FILE (user_pictures.json)

"Before" is the conversion each model's ``preprocess`` did until the transforms: the OOD models resized
bilinearly (PIL, ``resize=True``) and inverted only when told (``invert=True``); the captioner resized the
shorter side bilinearly. The VAEs already used a box filter and ``invert=auto``, so their before is their
after. "After" is ``model.preprocess`` with the card's transforms (un-enlarging, else the box filter;
``invert=auto``). ``filters``: the joint detector with each resampling filter in place of the card's, un-enlarging
off ("box" is the card before un-enlarging), and the card ("box + unenlarge").
Digits: the first 200 of each model's test split; scenes: 20 test scenes (seed 5), greedy captions.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's zoo and helpers, not an installed zoo
import zoo
from benchmarks.common.devices import add_device_option, describe, resolve_device
from benchmarks.common.user_pictures import KINDS, ood_acceptance, pictures, same_captions, scaled, vae_log_likelihood
from zoo.core.transforms import transform_batch
from zoo.loading import pretrained_cards

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from api_testlib import model_datamodule  # noqa: E402  the tests' helper: the datamodule a model was trained on

N_DIGITS, N_SCENES = 200, 20
DEVICE = ["cpu"]  # --device


def ood(name: str) -> dict:
    from zoo.models.ood.data import as_float

    model = zoo.load(name, device=DEVICE[0])
    x, y = model_datamodule(model).parts["test"][:2]
    x, y = as_float(x[:N_DIGITS]), y[:N_DIGITS]
    rows = {"originals": {"before": ood_acceptance(model, x, y), "after": ood_acceptance(model, x, y)}}
    old = dataclasses.replace(model.transforms(), resample="bilinear", invert="false", unenlarge=False)
    for kind_name, kind in KINDS.items():
        pics = pictures(x, kind)
        before = transform_batch(old, pics, (1, 8, 8), model.device, model.dtype, invert=kind.invert)
        rows[kind_name] = {"before": ood_acceptance(model, before, y), "after": ood_acceptance(model, pics, y)}
    return rows


def filters(name: str) -> dict:
    """The OOD model's acceptance on each kind of picture with each resampling filter in the transforms
    (invert=auto) and un-enlarging off: which filter suits which picture; "box + unenlarge" is the card."""
    from zoo.models.ood.data import as_float

    model = zoo.load(name, device=DEVICE[0])
    x, y = model_datamodule(model).parts["test"][:2]
    x, y = as_float(x[:N_DIGITS]), y[:N_DIGITS]
    out = {}
    for resample in ("box + unenlarge", "box", "nearest", "bilinear", "hamming"):
        tf = dataclasses.replace(model.transforms(), resample=resample.split()[0], unenlarge="+" in resample)
        out[resample] = {kind_name: ood_acceptance(model, transform_batch(tf, pictures(x, kind), (1, 8, 8),
                                                                         model.device, model.dtype), y)
                         for kind_name, kind in KINDS.items()}
    return out


def vae(name: str) -> dict:
    model = zoo.load(name, device=DEVICE[0])
    x = torch.cat([b[0] for b in model_datamodule(model).test_dataloader()])[:N_DIGITS]
    same = vae_log_likelihood(model, x)
    rows = {"originals": {"before": same, "after": same}}
    for kind_name, kind in KINDS.items():
        ll = vae_log_likelihood(model, pictures(x, kind))
        rows[kind_name] = {"before": ll, "after": ll}  # box filter and invert=auto already
    return rows


def sat(name: str) -> dict:
    from zoo.models.captioning.shapes import generate_split

    model = zoo.load(name, device=DEVICE[0])
    x = torch.from_numpy(generate_split(N_SCENES, seed=5, split="test").images).float() / 255
    reference = model.caption(x)
    old = dataclasses.replace(model.transforms(), resample="bilinear", unenlarge=False)
    rows = {"originals": {"before": 1.0, "after": 1.0}}
    for kind_name, kind in KINDS.items():
        if kind.invert or kind.bitmap:  # colour scenes: no polarity; not drawn as bitmaps
            continue
        pics = pictures(x, scaled(kind, 4))
        before = transform_batch(old, pics, (3, 64, 64), model.device, model.dtype)
        rows[kind_name.replace("x4", "x2").replace("x8", "x2")] = {
            "before": same_captions(model, before, reference), "after": same_captions(model, pics, reference)}
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("out", nargs="?", default="user_pictures.json", help="file name under studies/results/")
    add_device_option(ap)
    args = ap.parse_args()
    device = resolve_device(args.device)
    DEVICE[0] = str(device)
    torch.set_num_threads(1)
    command = " ".join(["OMP_NUM_THREADS=1 python studies/user_pictures.py", *sys.argv[1:]])
    record = {"command": command, "device": str(device), "device_name": describe(device), "n_digits": N_DIGITS,
              "n_scenes": N_SCENES, "measures": {
                  "ood": "fraction accepted as in-distribution by max-softmax at the card's threshold (and accuracy)",
                  "vae": "mean IWAE bound on log p(x), k=100, seed 0, nats",
                  "sat": "fraction of scenes captioned (greedy) as the original 64x64 scene"}, "models": {}}
    for name, run in [("ood-digits-joint", ood), ("ood-digits-ce", ood), ("vae-digits", vae), ("dvae-digits", vae),
                      ("sat-shapes-soft", sat)]:
        record["models"][name] = {"sha256": pretrained_cards()[name]["sha256"], "rows": run(name)}
        print(name, json.dumps(record["models"][name]["rows"], indent=1))
    record["filters"] = {"ood-digits-joint": filters("ood-digits-joint")}
    print("filters", json.dumps(record["filters"], indent=1))
    out = ROOT / "studies" / "results" / args.out
    out.write_text(json.dumps(record, indent=1) + "\n")
    print("wrote", out.relative_to(ROOT))


if __name__ == "__main__":
    main()
