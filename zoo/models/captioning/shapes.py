"""Generated "shapes scenes": the captioning zoo's embedded dataset (no download).

A scene is a small RGB canvas with 1-3 coloured shapes. Each scene comes with several reference
captions that name the objects (size, colour, shape) and a spatial relation between them, in
different orders and phrasings, e.g.

    a big red circle left of a small blue square
    a small blue square right of a big red circle
    a big red circle and a small blue square

There are 4 shapes x 5 colours x 2 sizes = 40 object kinds, placed anywhere on the canvas, so a
caption cannot be memorised: the decoder has to *look* at each object in turn. Because every
object's pixel mask is known, attention can be scored against the truth (`att_localisation`).

Everything is a deterministic function of (seed, split, index): the same seed always yields the
same scenes, captions and masks.
"""

# cpu file: datamodule: synthetic images (tests/platform/test_device_agnostic.py)

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SHAPES = ("circle", "square", "triangle", "diamond")
COLOURS = {  # name -> RGB in [0, 1]
    "red": (0.90, 0.15, 0.15),
    "green": (0.15, 0.75, 0.20),
    "blue": (0.20, 0.35, 0.95),
    "yellow": (0.95, 0.90, 0.15),
    "purple": (0.65, 0.25, 0.85),
}
SIZES = {"small": (0.08, 0.10), "big": (0.14, 0.17)}  # radius range as a fraction of the canvas
INVERSE = {"left of": "right of", "right of": "left of", "above": "below", "below": "above"}
SPLIT_OFFSET = {"train": 0, "val": 1, "test": 2}  # keeps the three splits' random streams apart


@dataclass
class Obj:
    shape: str  # one of SHAPES
    colour: str  # a key of COLOURS
    size: str  # "small" or "big"
    cx: float  # centre column in pixels
    cy: float  # centre row in pixels
    r: float  # "radius" (half the extent) in pixels

    def phrase(self, with_size: bool = True) -> str:
        return f"a {self.size} {self.colour} {self.shape}" if with_size else f"a {self.colour} {self.shape}"


def object_mask(o: Obj, size: int) -> np.ndarray:
    """Boolean (size, size) pixel mask of one object."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) + 0.5
    dx, dy = xx - o.cx, yy - o.cy
    if o.shape == "circle":
        return dx**2 + dy**2 <= o.r**2
    if o.shape == "square":
        s = 0.85 * o.r
        return (np.abs(dx) <= s) & (np.abs(dy) <= s)
    if o.shape == "diamond":
        return np.abs(dx) + np.abs(dy) <= 1.1 * o.r
    if o.shape == "triangle":  # apex up; base at cy + r
        top = o.cy - o.r
        frac = (yy - top) / (2 * o.r)  # 0 at the apex, 1 at the base
        return (frac >= 0) & (frac <= 1) & (np.abs(dx) <= frac * o.r * 1.05)
    raise ValueError(f"unknown shape {o.shape}")


def relation(a: Obj, b: Obj) -> str:
    """Where a is relative to b, along the dominant axis (image rows grow downwards)."""
    dx, dy = b.cx - a.cx, b.cy - a.cy
    if abs(dx) >= abs(dy):
        return "left of" if dx > 0 else "right of"
    return "above" if dy > 0 else "below"


def _clear_relation(a: Obj, b: Obj, margin: float) -> bool:
    """Objects do not overlap and the dominant axis is unambiguous."""
    dx, dy = abs(b.cx - a.cx), abs(b.cy - a.cy)
    apart = max(dx, dy) >= 1.1 * (a.r + b.r) + 2
    return apart and abs(dx - dy) >= margin


def sample_scene(rng: np.random.Generator, size: int, max_objects: int = 3) -> list[Obj]:
    """1..max_objects objects at random positions, non-overlapping, with clear pairwise relations."""
    n = int(rng.integers(1, max_objects + 1))
    while True:  # rejection sampling; a 64-px canvas fits 3 objects easily
        objs: list[Obj] = []
        for _ in range(n):
            size_word = str(rng.choice(list(SIZES)))
            lo, hi = SIZES[size_word]
            r = float(rng.uniform(lo, hi)) * size
            cx, cy = rng.uniform(r + 1, size - r - 1, size=2)
            objs.append(Obj(str(rng.choice(SHAPES)), str(rng.choice(list(COLOURS))), size_word,
                            float(cx), float(cy), r))
        if all(_clear_relation(a, b, 0.06 * size) for i, a in enumerate(objs) for b in objs[i + 1:]):
            return objs


def captions(objs: list[Obj]) -> list[str]:
    """Reference captions of a scene: the same content in several orders and phrasings."""
    if len(objs) == 1:
        (a,) = objs
        return [a.phrase(), f"there is {a.phrase()}", a.phrase(with_size=False)]
    order = sorted(objs, key=lambda o: o.cx)  # left to right
    a, b = order[0], order[1]
    if len(objs) == 2:
        r = relation(a, b)
        return [f"{a.phrase()} {r} {b.phrase()}", f"{b.phrase()} {INVERSE[r]} {a.phrase()}",
                f"{a.phrase()} and {b.phrase()}"]
    c = order[2]
    return [f"{a.phrase()} {relation(a, b)} {b.phrase()} and {c.phrase()}",
            f"{c.phrase()} {relation(c, b)} {b.phrase()} and {a.phrase()}",
            f"{a.phrase()} , {b.phrase()} and {c.phrase()}"]


def render(objs: list[Obj], size: int, rng: np.random.Generator, noise: float = 0.04) -> np.ndarray:
    """uint8 (3, size, size) image: dark noisy background, objects painted with a jittered colour."""
    img = np.full((size, size, 3), 0.12, np.float32)
    img += rng.normal(0, noise, (size, size, 3)).astype(np.float32)
    for o in objs:
        rgb = np.clip(np.array(COLOURS[o.colour], np.float32) + rng.uniform(-0.06, 0.06, 3), 0, 1)
        img[object_mask(o, size)] = rgb
    return (np.clip(img, 0, 1) * 255).round().astype(np.uint8).transpose(2, 0, 1)


@dataclass
class ShapesSplit:
    images: np.ndarray  # (N, 3, S, S) uint8
    scenes: list[list[Obj]]  # objects of every image
    refs: list[list[str]]  # reference captions of every image


def generate_split(n: int, seed: int, split: str, size: int = 64, max_objects: int = 3) -> ShapesSplit:
    """n scenes of one split, reproducible from (seed, split)."""
    rng = np.random.default_rng([seed, SPLIT_OFFSET[split]])
    scenes = [sample_scene(rng, size, max_objects) for _ in range(n)]
    images = np.stack([render(s, size, rng) for s in scenes]) if n else np.zeros((0, 3, size, size), np.uint8)
    return ShapesSplit(images, scenes, [captions(s) for s in scenes])


def scene_masks(objs: list[Obj], size: int, max_objects: int = 3) -> np.ndarray:
    """(max_objects, size, size) float masks, zero-padded."""
    out = np.zeros((max_objects, size, size), np.float32)
    for k, o in enumerate(objs):
        out[k] = object_mask(o, size)
    return out
