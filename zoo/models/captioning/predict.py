"""Show, Attend and Tell's inference API (a mixin of ``ShowAttendTell``) and ``python -m zoo.predict``.

    model = zoo.load("sat-shapes-soft")
    model.caption(["scene.png"], beam=3)            # ['a red square left of a blue circle']
    r = model.caption(x, return_attention=True)     # r.text, r.log_probs (B,), r.attention (B, T, h, w)
    model.caption(x, sample=5, seed=0)              # 5 distinct captions an image (stochastic beam search)

``model.preprocess`` turns files, PIL images or numpy arrays into the tensor the encoder was trained on
(shorter side resized, centre crop, the data's normalisation).

Command line: ``python -m zoo.predict TARGET img1.png img2.png [beam=3] [sbs=5] [overlay=out.png]``

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
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from zoo.core.inputs import check_count, generator, image_batch
from zoo.core.transforms import ImageTransforms, card_transforms, transform_batch
from zoo.errors import UserError
from zoo.paths import check_output_file, make_folder
from zoo.schema import at_least, between, validate

from . import decode as D
from .config import MAX_BEAMS, MAX_LEN
from .images import IMAGENET_MEAN, IMAGENET_STD, SHAPES_DATA, conversion_note, load_image
from .plots import attention_figure, displayable


@dataclass
class Captions:
    """``caption(..., return_attention=True)``: B images' captions with what produced them (tensors on the
    model's device)."""

    text: list  # B captions (str); with sample=k, B lists of k captions, most probable first
    log_probs: Tensor  # (B,) log p(caption | image); with sample=k (B, k), in the order of ``text``
    tokens: Tensor  # (B, T) token ids of the beam captions (ending in <end> and padding); (B, k, T) sampled
    attention: Tensor | None  # (B, T, h, w): the attention used for token t of caption b (beam captions only)


class CaptionAPI:
    """Needs ``encode``, ``decoder``, ``decode_mode``, ``vocab``, ``max_len`` and ``data_info`` (module.py)."""

    def transforms(self) -> ImageTransforms:
        """The input transforms of the card (``zoo.transforms(name)``), or derived from the model's data for a
        checkpoint or an older card: RGB, shorter side resized to S, centre crop, the data's normalisation;
        the shapes scenes (drawn on the pixel grid) with a box filter, photos bilinear."""
        found = card_transforms(self)
        if found is not None:
            return found
        info = self.data_info
        size, norm = int(info.get("image_size", 224)), info.get("normalize", "imagenet")
        unit = norm != "imagenet"
        return ImageTransforms(size=(size, size), channels=3, resample="box" if unit else "bilinear",
                               resize="shorter_side", polarity="none", invert="false",
                               mean=None if unit else IMAGENET_MEAN, std=None if unit else IMAGENET_STD,
                               data=SHAPES_DATA if info.get("dataset") == "shapes" else "")

    def preprocess(self, images: Any, notes: bool = False, strict: bool = False) -> Tensor:
        """Images as the encoder was trained on them: (B, 3, S, S) on the model's device. ``images``: a
        tensor batch (B, 3, S, S) (checked, moved), or one or a list of file paths, PIL images, numpy arrays
        or tensor images of any size through ``transforms()`` (shorter side resized to S with the card's
        filter, centre crop, the data's normalisation). ``notes``: say on stderr when an image is enlarged
        or has no colour (the command line does). ``strict``: refuse pictures of another size instead."""
        tf = self.transforms()
        size = tf.size[0]
        if isinstance(images, (str, Path)) or (isinstance(images, (list, tuple)) and images
                                               and all(isinstance(i, (str, Path)) for i in images)):
            paths = [images] if isinstance(images, (str, Path)) else list(images)  # its messages for files
            return torch.stack([load_image(p, lambda img, p=p: tf(img, strict=strict, name=str(p)),
                                           size if notes else None) for p in paths]).to(self.device, self.dtype)
        if not notes:
            return transform_batch(tf, images, (3, size, size), self.device, self.dtype, None, strict)

        def convert(img: Any, name: str) -> Tensor:
            note = conversion_note(img, size)
            if note:
                print(f"note: {name} {note}", file=sys.stderr)
            return tf(img, strict=strict, name=name)

        return image_batch(images, convert, (3, size, size), self.device, self.dtype)

    def check_beams(self, k: Any, what: str) -> int:
        words = len(self.vocab)
        most = min(words, MAX_BEAMS)  # a step has no more than `words` choices
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise UserError(f"{what} must be an integer >= 1, got {k!r}")
        if k > most:
            raise UserError(f"{what} must be at most {most} (the model's vocabulary has {words} words; "
                            f"at most {MAX_BEAMS} beams), got {k}")
        return k

    @torch.no_grad()
    def caption(self, images: Any, beam: int = 1, return_attention: bool = False, sample: int | None = None,
                seed: int | None = None, max_len: int | None = None, length_norm: float = 0.0
                ) -> list[str] | list[list[str]] | Captions:
        """Captions of images (a tensor (B, 3, S, S), or paths / PIL images / numpy arrays: ``preprocess``).

        - ``beam``: beam search with that many beams (1: greedy); the best caption of each image, list[str].
        - ``sample=k``: k distinct captions an image by stochastic beam search (Kool et al. 2019), sampled
          without replacement, most probable first: list[list[str]]; ``seed`` makes them reproducible.
        - ``return_attention``: a ``Captions`` record instead (text, log-probabilities, token ids and, for
          beam captions, the attention over the image's h x w grid for every word).
        ``max_len``: the longest caption (default: the model's); ``length_norm``: rank beams by
        log p / length^length_norm."""
        max_len = self.max_len if max_len is None else check_count(max_len, "max_len")
        if max_len > MAX_LEN:
            raise UserError(f"max_len must be at most {MAX_LEN} words, got {max_len}")
        x = self.preprocess(images)
        feats, grid = self.encode(x)  # (B, L, D)
        v = self.vocab
        if sample is not None:
            k = self.check_beams(sample, "sample")
            g = generator(seed, self.device)
            res = D.generate(self.decoder, feats, self.decode_mode, v.start, v.end, v.pad, max_len, k=k,
                             stochastic=True, generator=g)
            lp, order = res.log_probs.sort(dim=1, descending=True)  # (B, k) most probable first
            seqs = res.sequences.gather(1, order[..., None].expand_as(res.sequences))  # (B, k, T)
            found = lp > -math.inf  # fewer than k distinct captions exist for a short max_len
            text = [[v.decode(s) for s, ok in zip(row.tolist(), oks.tolist()) if ok] for row, oks in zip(seqs, found)]
            return Captions(text, lp, seqs, None) if return_attention else text
        self.check_beams(beam, "beam")
        res = D.generate(self.decoder, feats, self.decode_mode, v.start, v.end, v.pad, max_len, k=beam,
                         length_norm=float(length_norm))
        best = res.sequences[:, 0]  # (B, T)
        text = [v.decode(s) for s in best.tolist()]
        if not return_attention:
            return text
        _, used = D.attention_of(self.decoder, feats, best, self.decode_mode, v.start)  # (B, T, L)
        return Captions(text, res.log_probs[:, 0], best, used.view(*used.shape[:2], *grid))


@dataclass
class PredictOptions:
    """``python -m zoo.predict sat-shapes-soft IMAGE ... key=value``."""

    beam: int = at_least(3, 1)  # beam width of the caption (1: greedy; at most the model's vocabulary: check_beams)
    sbs: int = 0  # also this many distinct captions by stochastic beam search (0: none)
    overlay: str = ""  # write the attention overlay of the first image here (a .png)
    max_len: int = between(0, 0, MAX_LEN, why="words; 0 = the model's own")  # longest caption in words (0: the model's)
    length_norm: float = 0.0  # beam score / length ** length_norm
    seed: int = 0  # stochastic beam search's seed


def predict_cli(model: Any, inputs: list[str], options: dict) -> None:
    opts = validate(PredictOptions, options, "the captioning model (sat)", what="option")
    if not inputs:
        raise UserError("give image files to caption: python -m zoo.predict TARGET img1.png [img2.jpg ...]")
    model.check_beams(opts["beam"], "option beam")  # the bound this model's vocabulary sets
    if opts["sbs"]:
        model.check_beams(opts["sbs"], "option sbs")
    if opts["overlay"]:  # checked before the decoding; its folder is created when the figure is saved
        check_output_file(opts["overlay"], "overlay", "figure", inputs=inputs)
    images = model.preprocess(inputs, notes=True)  # notes: resized, grey
    max_len = opts["max_len"] or model.max_len
    if opts["sbs"]:
        sampled = model.caption(images, sample=opts["sbs"], seed=opts["seed"], max_len=max_len, return_attention=True)
        for path, texts, lps in zip(inputs, sampled.text, sampled.log_probs.tolist()):  # most probable first
            print(f"{path}:")
            for text, lp in zip(texts, lps):
                print(f"  p={math.exp(lp):.4f}  {text}")
    res = model.caption(images, beam=opts["beam"], max_len=max_len, length_norm=float(opts["length_norm"]),
                        return_attention=bool(opts["overlay"]))
    captions = res.text if opts["overlay"] else res
    if not opts["sbs"]:
        for path, cap in zip(inputs, captions):
            print(f"{path}: {cap}")
    elif opts["overlay"]:  # the overlay shows the beam's caption, which the samples above need not include
        for path, cap in zip(inputs, captions):
            print(f"{path} (beam {opts['beam']}, in the overlay): {cap}")
    if opts["overlay"]:
        shown = displayable(images, model.data_info.get("normalize", "unit"))
        fig = attention_figure(shown, [c.split() for c in captions], res.attention.flatten(2),
                               tuple(res.attention.shape[2:]), titles=[Path(p).name for p in inputs])
        out = Path(opts["overlay"])
        make_folder(out.parent)
        fig.savefig(out, dpi=110, bbox_inches="tight")
        import matplotlib.pyplot as plt  # imported when used: matplotlib

        plt.close(fig)
        print(f"attention overlay written to {out}")
