"""`python -m zoo.predict TARGET img1.png img2.png [beam=3] [sbs=5] [overlay=out.png]` for captioners.

    beam=K         beam search with K beams (1 = greedy); prints the best caption per image
    sbs=K          stochastic beam search: K distinct captions sampled without replacement, each
                   with its probability under the model (beam, sbs: at most the vocabulary's size
                   and 100)
    overlay=PATH   save the per-word attention over each image (PNG)
    max_len=N      longest caption (default: the model's; at most 1000)
    length_norm=A  rank beams by log p / length^A
    seed=N         seed of the stochastic beam search
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from zoo.core.module import check_options
from zoo.errors import UserError
from zoo.paths import check_output_file, make_folder

from . import decode as D
from .config import MAX_BEAMS, MAX_LEN
from .images import image_transform, load_image

DEFAULTS = {"beam": 3, "sbs": 0, "overlay": "", "max_len": 0, "length_norm": 0.0, "seed": 0}


def predict_cli(model, inputs: list[str], options: dict) -> None:
    opts = check_options(options, DEFAULTS, "the captioning model (sat)")
    if not inputs:
        raise UserError("give image files to caption: python -m zoo.predict TARGET img1.png [img2.jpg ...]")
    for key in ("beam", "sbs", "max_len", "seed"):
        if not isinstance(opts[key], int) or opts[key] < 0:
            raise UserError(f"option {key} must be a non-negative integer, got {opts[key]!r}")
    if opts["beam"] < 1:
        raise UserError("option beam must be >= 1 (1 = greedy)")
    words = len(model.data_info["vocab"])
    most = min(words, MAX_BEAMS)  # beam=100000 decoded for minutes; a step has no more than `words` choices
    for key in ("beam", "sbs"):
        if opts[key] > most:
            raise UserError(f"option {key} must be at most {most} (the model's vocabulary has {words} words; "
                            f"at most {MAX_BEAMS} beams), got {opts[key]}")
    if opts["max_len"] > MAX_LEN:
        raise UserError(f"option max_len must be at most {MAX_LEN} words (0 = the model's, {model.max_len}), "
                        f"got {opts['max_len']}")
    if opts["overlay"]:  # checked before the decoding; its folder is created when the figure is saved
        check_output_file(opts["overlay"], "overlay", "figure", inputs=inputs)
    info = model.data_info
    size = int(info.get("image_size", 224))
    tf = image_transform(size, info.get("normalize", "imagenet"))
    images = torch.stack([load_image(p, tf, size) for p in inputs]).to(model.device)  # notes: resized, grey
    max_len = opts["max_len"] or model.max_len
    feats, grid = model.encode(images)
    vocab = model.vocab
    if opts["sbs"]:
        gen = torch.Generator(device=model.device).manual_seed(int(opts["seed"]))
        res = D.generate(model.decoder, feats, model.decode_mode, vocab.start, vocab.end, vocab.pad, max_len,
                         k=opts["sbs"], stochastic=True, generator=gen)
        for i, path in enumerate(inputs):  # k distinct samples, shown most probable first
            print(f"{path}:")
            found = zip(res.log_probs[i].tolist(), res.sequences[i].tolist())
            for lp, seq in sorted((x for x in found if x[0] > -math.inf), reverse=True):
                print(f"  p={math.exp(lp):.4f}  {vocab.decode(seq)}")
    res = D.generate(model.decoder, feats, model.decode_mode, vocab.start, vocab.end, vocab.pad, max_len,
                     k=opts["beam"], length_norm=float(opts["length_norm"]))
    best = res.sequences[:, 0]
    captions = [vocab.decode(s) for s in best.tolist()]
    if not opts["sbs"]:
        for path, cap in zip(inputs, captions):
            print(f"{path}: {cap}")
    elif opts["overlay"]:  # the overlay shows the beam's caption, which the samples above need not include
        for path, cap in zip(inputs, captions):
            print(f"{path} (beam {opts['beam']}, in the overlay): {cap}")
    if opts["overlay"]:
        _, used = D.attention_of(model.decoder, feats, best, model.decode_mode, vocab.start)
        from .plots import attention_figure, displayable  # imported when used: torch

        shown = displayable(images, info.get("normalize", "unit"))
        fig = attention_figure(shown, [c.split() for c in captions], used, grid,
                               titles=[Path(p).name for p in inputs])
        out = Path(opts["overlay"])
        make_folder(out.parent)
        fig.savefig(out, dpi=110, bbox_inches="tight")
        import matplotlib.pyplot as plt  # imported when used: matplotlib

        plt.close(fig)
        print(f"attention overlay written to {out}")
