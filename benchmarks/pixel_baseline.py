"""The reference points of the VAE tables: the best latent-free model of the binarised digits
(independent per-pixel Bernoullis fitted on the training split) and a model that knows nothing
(every pixel a fair coin, 64 ln 2 nats: where an untrained VAE, whose decoder outputs logits
near 0, starts), in nats per image on the splits the VAE recipes use.

    python benchmarks/pixel_baseline.py    # -> benchmarks/results/pixel_baseline_digits.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.common.devices import add_device_option, describe, processor, resolve_device  # noqa: E402
from zoo.models.vae.data import DigitsData  # noqa: E402


def images(dataset, device) -> torch.Tensor:
    return torch.stack([dataset[i][0].flatten() for i in range(len(dataset))]).to(device)  # (N, 64)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    add_device_option(ap)
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/pixel_baseline_digits.json"))
    args = ap.parse_args()
    device = resolve_device(args.device)
    data = DigitsData({})  # the recipes' defaults: static binarisation at 0.5, seed 0
    data.setup("fit")
    train, val, test = (images(s, device) for s in (data.train_set, data.val_set, data.test_set))
    # a pixel that is never on (or always on) in training gets p = 0 (1): add-one smoothing keeps
    # the likelihood of held-out images finite, as a Beta(1, 1) prior would
    p = (train.sum(0) + 1) / (len(train) + 2)  # (64,)
    bern = torch.distributions.Bernoulli(probs=p)

    def nll(x: torch.Tensor) -> float:
        return float(-bern.log_prob(x).sum(1).mean())

    splits = {"train": train, "val": val, "test": test}
    record = {
        "command": "python " + " ".join(sys.argv),
        "device": str(device), "device_name": describe(device), "machine": processor(),
        "data": "scikit-learn digits, static binarisation at 0.5, data.seed 0 (the vae_digits / dvae_digits split)",
        "n": {"train": len(train), "val": len(val), "test": len(test)},
        "independent_pixels_nll": {name: round(nll(x), 3) for name, x in splits.items()},
        "fair_coin_nll": round(64 * math.log(2), 3),
        "smoothing": "add-one (Beta(1,1) prior) on the training counts",
    }
    print(json.dumps(record, indent=1))
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
