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


def tiny_karpathy(dataset: str):
    def write(tmp_path: Path) -> list[str]:
        import sys

        sys.path.insert(0, str(Path(__file__).parent / "captioning"))
        from tiny_karpathy import karpathy_overrides

        return karpathy_overrides(tmp_path, dataset)

    return write


def tiny_text8(tmp_path: Path) -> list[str]:
    """One long line of space-separated words, like text8 (200 word types, 30k tokens)."""
    import numpy as np

    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(200)] + ["king", "queen", "man", "woman", "france", "paris"]
    probs = 1.0 / np.arange(1, len(words) + 1)
    tokens = rng.choice(words, size=30_000, p=probs / probs.sum())
    path = tmp_path / "text8"
    path.write_text(" ".join(tokens))
    return [f"data.files={path}", "data.chunk_tokens=5000"]


REAL_DATA.update({"sat_flickr8k": tiny_karpathy("flickr8k"), "sat_coco": tiny_karpathy("coco"),
                  "skipgram_text8": tiny_text8})


def tiny_ood(dataset: str):
    def write(tmp_path: Path) -> list[str]:
        import sys

        sys.path.insert(0, str(Path(__file__).parent / "ood"))
        from tiny_ood_files import paper_overrides

        return paper_overrides(dataset)(tmp_path)

    return write


REAL_DATA.update({f"ood_{d}_{m}": tiny_ood(d) for d in ("svhn", "cifar10") for m in ("ce", "joint")})
