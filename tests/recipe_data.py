"""Tiny files in the real formats, so the smoke test can run recipes made for real datasets.
Each writer takes pytest's tmp_path and returns the overrides that point the recipe at them."""

from pathlib import Path


def tiny_mnist(tmp_path: Path) -> list[str]:
    import numpy as np

    from zoo.models.vae.data import write_idx

    rng = np.random.default_rng(0)
    root = tmp_path / "data"
    for name, shape in [("train-images-idx3-ubyte", (60, 28, 28)), ("train-labels-idx1-ubyte", (60,)),
                        ("t10k-images-idx3-ubyte", (20, 28, 28)), ("t10k-labels-idx1-ubyte", (20,))]:
        high = 256 if len(shape) == 3 else 10
        write_idx(root / "mnist" / f"{name}.gz", rng.integers(0, high, shape, dtype=np.uint8))
    return [f"data.root={root}", "data.val_size=20", "data.batch_size=10"]


REAL_DATA = {"vae_mnist": tiny_mnist, "dvae_mnist": tiny_mnist}
