"""What the shared recipe tests need of the skip-gram recipes (collected by tests/recipe_data.py)."""

from pathlib import Path


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


REAL_DATA = {"skipgram_text8": tiny_text8}

SMALL = ["model.dim=8", "data.planted.tokens=20000", "data.chunk_tokens=4000"]
RESUME = {
    "skipgram_synthetic": [*SMALL, "model.updates=sequential"],  # word2vec's per-pair SGD (numba)
    "skipgram_synthetic:minibatch": [*SMALL, "model.updates=minibatch", "model.batch_centres=256"],
    "skipgram_synthetic_nce": [*SMALL, "model.updates=sequential"],
    "skipgram_synthetic_softmax": [*SMALL, "model.updates=minibatch", "model.batch_centres=256"],
}
# the cases make test resumes (the most stateful loops); the rest run in make test-slow
RESUME_FAST = ("skipgram_synthetic",)
REPRESENTED = "the same model and training loop as {}, on data read from files (their reader has its own tests)"
NOT_RESUMED = {"skipgram_lee": REPRESENTED.format("skipgram_synthetic"),
               "skipgram_text8": REPRESENTED.format("skipgram_synthetic")}
