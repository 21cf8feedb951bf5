"""Tiny Karpathy-split datasets in the real format (JSON + PNG/JPEG images) for tests and the recipe
smoke test of the real-data recipes (`karpathy_overrides` is what captioning_cases.py registers)."""

import json
from pathlib import Path

import numpy as np
from PIL import Image

WORDS = ["a", "dog", "cat", "runs", "on", "the", "grass", "man", "rides", "bike", "red", "ball"]


def write_tiny_karpathy(root: Path, dataset: str = "flickr8k", n: int = 10,
                        size: tuple[int, int] = (40, 56)) -> tuple[Path, Path]:
    """Writes <root>/dataset_<dataset>.json and <root>/images/ (COCO: images under train2014/ and
    val2014/ named by 'filepath', with a 'restval' split). Returns (json path, image folder)."""
    rng = np.random.default_rng(0)
    images = []
    for i in range(n):
        split = ["train", "train", "train", "val", "test"][i % 5]
        entry = {"imgid": i, "split": split, "sentences": []}
        if dataset == "coco":
            split = "restval" if i == 1 else split
            entry.update(split=split, filepath="train2014" if split == "train" else "val2014",
                         filename=f"COCO_{i:012d}.jpg")
        else:
            entry["filename"] = f"{i}_img.jpg" if i % 2 else f"{i}_img.png"
        for _ in range(5):
            words = [str(w) for w in rng.choice(WORDS, size=int(rng.integers(3, 9)))]
            entry["sentences"].append({"tokens": words, "raw": " ".join(words)})
        folder = root / "images" / entry.get("filepath", "")
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 255, (*size, 3), dtype=np.uint8)).save(folder / entry["filename"])
        images.append(entry)
    path = root / f"dataset_{dataset}.json"
    path.write_text(json.dumps({"images": images, "dataset": dataset}))
    return path, root / "images"


def karpathy_overrides(tmp_path: Path, dataset: str) -> list[str]:
    """Overrides pointing a real-data recipe at tiny files, with a from-scratch encoder (no ImageNet
    weights in the test machine's cache), small images and a small LSTM (the recipe's architecture
    otherwise: VGG-19 encoder, attention, gate, deep output)."""
    js, images = write_tiny_karpathy(Path(tmp_path) / dataset, dataset)
    return [f"data.json={js}", f"data.image_dir={images}", "data.image_size=32", "data.min_freq=1",
            "data.num_workers=0", "data.batch_size=4", "model.pretrained_encoder=false", "model.grid=4",
            "model.hidden_dim=64", "model.embed_dim=32", "model.att_dim=32"]
