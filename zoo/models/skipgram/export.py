"""word2vec's vector file formats (what ``gensim.models.KeyedVectors.load_word2vec_format`` reads).

Text: a header ``V D``, then one line per word: ``word x1 x2 ... xD``.
Binary (word2vec.c ``-binary 1``): the same header line, then per word ``word`` + a space + D
little-endian float32 + ``\\n``.
"""

# cpu file: export: word2vec files (tests/platform/test_device_agnostic.py)

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from zoo.errors import UserError
from zoo.paths import make_folder


def save_word2vec(path: str | Path, words: list[str], vectors: torch.Tensor, binary: bool | None = None
                  ) -> Path:
    """Write ``vectors`` (V, D) for ``words``; ``binary`` defaults to the suffix (.bin -> binary)."""
    path = Path(path)
    binary = path.suffix == ".bin" if binary is None else binary
    arr = vectors.detach().float().cpu().numpy()
    if arr.shape[0] != len(words):
        raise ValueError(f"{len(words)} words but {arr.shape[0]} vectors")
    bad = [w for w in words if not w or any(ch.isspace() for ch in w)]
    if bad:
        raise UserError(f"cannot write word2vec format: words with whitespace or empty: {bad[:5]}")
    make_folder(path.parent)
    with open(path, "wb") as f:
        f.write(f"{arr.shape[0]} {arr.shape[1]}\n".encode())
        if binary:
            little = arr.astype("<f4")
            for word, row in zip(words, little):
                f.write(word.encode("utf-8") + b" " + row.tobytes() + b"\n")
        else:
            for word, row in zip(words, arr):
                f.write((word + " " + " ".join(f"{x:.6g}" for x in row) + "\n").encode("utf-8"))
    return path


def load_word2vec(path: str | Path, binary: bool | None = None) -> tuple[list[str], torch.Tensor]:
    """Read a word2vec text or binary file back: (words, vectors (V, D))."""
    path = Path(path)
    binary = path.suffix == ".bin" if binary is None else binary
    with open(path, "rb") as f:
        header = f.readline().split()
        if len(header) != 2:
            raise UserError(f"{path}: not a word2vec file (first line should be 'V D')")
        n, dim = int(header[0]), int(header[1])
        words, rows = [], np.empty((n, dim), dtype=np.float32)
        for i in range(n):
            if binary:
                word = bytearray()
                while (ch := f.read(1)) != b" ":
                    if not ch:
                        raise UserError(f"{path}: truncated at word {i}")
                    if ch != b"\n":
                        word += ch
                words.append(word.decode("utf-8"))
                rows[i] = np.frombuffer(f.read(4 * dim), dtype="<f4")
            else:
                parts = f.readline().decode("utf-8").rstrip("\n").split(" ")
                words.append(parts[0])
                rows[i] = np.asarray(parts[1:dim + 1], dtype=np.float32)
    return words, torch.from_numpy(rows)
