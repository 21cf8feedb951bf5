"""A tiny Omniglot in the official layout: <root>/omniglot/images_background|images_evaluation/
<alphabet>/<character>/<id>_<drawing>.png, 105x105 greyscale PNGs (black strokes on white)."""

from pathlib import Path

import numpy as np


def write_tiny_omniglot(root: Path, alphabets=(3, 2), characters: int = 4, drawings: int = 6, seed: int = 0) -> Path:
    """``alphabets`` = (background, evaluation) alphabet counts; returns <root>/omniglot."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    folder = root / "omniglot"
    for split, n_alpha in zip(("images_background", "images_evaluation"), alphabets):
        for a in range(n_alpha):
            for c in range(characters):
                char = folder / split / f"{split[7:]}_Alphabet_{a}" / f"character{c + 1:02d}"
                char.mkdir(parents=True, exist_ok=True)
                template = rng.random((105, 105)) < 0.1  # each character: its own stroke pattern
                for d in range(drawings):
                    noise = rng.random((105, 105)) < 0.02
                    img = np.where(template ^ noise, 0, 255).astype(np.uint8)
                    Image.fromarray(img, mode="L").save(char / f"{a:02d}{c:02d}_{d + 1:02d}.png")
    return folder


def omniglot_overrides(tmp_path: Path) -> list[str]:
    """20 characters (12 train, 8 held out) x 6 drawings: enough for 20-way 1-shot with rotations."""
    write_tiny_omniglot(tmp_path / "data")
    return [f"data.root={tmp_path / 'data'}", "data.train_characters=12", "data.query=3", "data.val_tasks=4",
            "data.test_tasks=4", "data.meta_batch=2", "data.eval_batch_tasks=2", "model.filters=8"]
