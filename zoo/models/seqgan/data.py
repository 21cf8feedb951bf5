"""SeqGAN's datamodules: sequences sampled from the oracle LSTM (``seqgan_oracle``) and lines of text
(``seqgan_text``).

The synthetic experiment (``seqgan_oracle``): the oracle comes from ``oracle_params`` (a ``.npz`` in
the paper's format, e.g. the published oracle) or, by default, is drawn from N(0, 1) with ``seed``.
Training, validation and test sequences are ancestral samples of it with their own seeds (cached
under ``root``). Batches are LongTensors (B, T).

Real text (``seqgan_text``): one sequence per line of a text file, a WordLevel vocabulary from
Hugging Face ``tokenizers``, fixed length.

Encoding: words of a line (lower-cased unless ``lowercase=false``), cut to ``max_len - 1`` words,
then [EOS], then [PAD] up to ``max_len``; G starts from [BOS]. Decoding stops at the first [EOS] or
[PAD]. The vocabulary is built on the training lines only (words seen fewer than
``min_frequency`` times map to [UNK]). Lines are split into train / val / test by a seeded shuffle.

The embedded default (no ``path``) is a corpus generated from a small template grammar ("the
small cat sees a red ball in the garden ."), so every recipe runs offline; its rules give the
samples something to get right beyond word frequencies.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from zoo.core.data import ZooDataModule, load_cache, save_cache
from zoo.core.files import open_text, refuse_binary, replace_undecoded
from zoo.errors import UserError
from zoo.models.seqgan.config import SEQGAN_ORACLE_SPEC, SEQGAN_TEXT_SPEC
from zoo.models.seqgan.oracle import lm_from_params, load_oracle_npz, random_oracle_params


class Sequences(Dataset):
    """A (N, T) LongTensor of token sequences; items are (T,) rows."""

    def __init__(self, seqs: torch.Tensor):
        self.seqs = seqs

    def __len__(self) -> int:
        return len(self.seqs)

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.seqs[i]


class OracleData(ZooDataModule):
    """Sequences sampled from SeqGAN's random LSTM oracle (seeded, or loaded from a .npz)."""

    drop_last_train = True  # every training batch has batch_size sequences

    spec = SEQGAN_ORACLE_SPEC

    def __init__(self, cfg: dict):
        super().__init__(cfg)
        self.oracle = None
        self.train_set = self.val_set = self.test_set = None
        self._unsaved: tuple[Path, list] | None = None  # fresh samples, cached once a loader is asked for

    def setup(self, stage: str | None = None) -> None:
        if self.oracle is not None:
            return
        c = self.cfg
        if c.oracle_params:
            params = load_oracle_npz(c.oracle_params)
        else:
            params = random_oracle_params(c.seed, c.vocab_size, c.emb_dim, c.hidden_dim)
        self.oracle = lm_from_params(params).eval().requires_grad_(False)
        cache = self._cache_path(params)
        saved = load_cache(cache) or {}
        splits = [saved[k] for k in ("train", "val", "test")] if {"train", "val", "test"} <= set(saved) else None
        if splits is None:
            splits = []
            for offset, n in ((1, c.num_train), (2, c.num_val), (3, c.num_test)):
                g = torch.Generator().manual_seed(c.seed * 1000 + offset)
                splits.append(self.oracle.sample(n, c.seq_len, generator=g))
            # written with the first loader, not here: zoo.runner builds the model after setup(), and a
            # model that refuses the data (D's filters wider than seq_len) must leave nothing on disk
            self._unsaved = (cache, splits)
        self.train_set, self.val_set, self.test_set = (Sequences(x) for x in splits)

    def _save_samples(self) -> None:
        if self._unsaved is not None:
            cache, splits = self._unsaved
            save_cache(dict(zip(("train", "val", "test"), splits)), cache)
            self._unsaved = None

    def train_dataloader(self):
        self._save_samples()
        return super().train_dataloader()

    def val_dataloader(self):
        self._save_samples()
        return super().val_dataloader()

    def test_dataloader(self):
        self._save_samples()
        return super().test_dataloader()

    def _cache_path(self, params: dict) -> Path:
        """Sampling 12,000 sequences from a vocab-5,000 oracle takes seconds; the samples are cached
        under ``root``, keyed by a hash of the oracle's parameters and the sampling settings."""
        c = self.cfg
        h = hashlib.sha256(repr((c.seed, c.seq_len, c.num_train, c.num_val, c.num_test)).encode())
        for key in sorted(params):
            h.update(key.encode() + np.ascontiguousarray(params[key], dtype=np.float32).tobytes())
        return Path(c.root) / "seqgan_oracle" / f"samples-{h.hexdigest()[:20]}.pt"

    def info(self) -> dict:
        if self.oracle is None:
            raise UserError("seqgan_oracle: call setup() before info()")
        o = self.oracle
        return {
            "vocab_size": o.vocab_size,
            "seq_len": self.cfg.seq_len,
            "start_token": 0,
            "num_train": self.cfg.num_train,
            "oracle": {"vocab_size": o.vocab_size, "emb_dim": o.emb_dim, "hidden_dim": o.hidden_dim},
        }


SPECIALS = ["[PAD]", "[UNK]", "[BOS]", "[EOS]"]  # ids 0..3 in this order

_GRAMMAR = {
    "S": [
        ["NP", "VP", "."],
        ["NP", "VP", "PP", "."],
        ["PP", ",", "NP", "VP", "."],
        ["NP", "and", "NP", "VPL", "."],
    ],
    "NP": [["DET", "N"], ["DET", "ADJ", "N"], ["DET", "ADJ", "ADJ", "N"]],
    "VP": [["VT", "NP"], ["VI"], ["VI", "ADV"]],
    "VPL": [["VTL", "NP"], ["VIL"]],
    "PP": [["P", "DET", "PLACE"]],
    "DET": [["the"], ["a"], ["every"], ["one"]],
    "ADJ": [["small"], ["big"], ["red"], ["green"], ["old"], ["young"], ["quiet"], ["happy"]],
    "N": [["cat"], ["dog"], ["bird"], ["child"], ["farmer"], ["teacher"], ["ball"], ["book"]],
    "VT": [["sees"], ["finds"], ["likes"], ["carries"], ["watches"]],
    "VI": [["sleeps"], ["runs"], ["sings"], ["waits"]],
    "VTL": [["see"], ["find"], ["like"], ["carry"], ["watch"]],
    "VIL": [["sleep"], ["run"], ["sing"], ["wait"]],
    "ADV": [["slowly"], ["quickly"], ["today"], ["again"]],
    "P": [["in"], ["near"], ["behind"]],
    "PLACE": [["garden"], ["house"], ["park"], ["river"], ["school"]],
}


def grammar_sentences(n: int, seed: int) -> list[str]:
    """n sentences from the template grammar (seeded; subject-verb agreement for 'X and Y')."""
    rng = random.Random(seed)

    def expand(symbol: str) -> list[str]:
        if symbol not in _GRAMMAR:
            return [symbol]
        return [w for part in rng.choice(_GRAMMAR[symbol]) for w in expand(part)]

    return [" ".join(expand("S")) for _ in range(n)]


def read_lines(path: Path, lowercase: bool) -> list[str]:
    if path.is_dir():
        raise UserError(f"data.path={path} is a folder: give the text file inside it (one sentence per line)")
    if not path.is_file():
        raise UserError(
            "text file not found: give data.path=FILE with one sentence per line (relative paths are looked up "
            "under data.root), or leave it unset for the embedded corpus", details=[f"looked at {path}"])
    # a BOM is skipped; .gz / .bz2 / .xz / a zip of one file read as text
    with open_text(path, "text file (data.path)") as f:
        text = f.read()
    refuse_binary(text, path, "give a UTF-8 text file with one sentence per line, or leave data.path unset for "
                  "the embedded corpus")  # binary data would train on made-up "words"
    text = replace_undecoded(text, path)  # a stray Latin-1 byte becomes U+FFFD, with one warning naming the file
    lines = [" ".join(line.split()) for line in text.splitlines()]
    lines = [line.lower() if lowercase else line for line in lines if line]
    return lines


class TextData(ZooDataModule):
    """Sentences from a text file (one per line) or the embedded grammar corpus, WordLevel vocabulary."""

    drop_last_train = True  # every training batch has batch_size sequences

    spec = SEQGAN_TEXT_SPEC

    def __init__(self, cfg: dict):
        super().__init__(cfg)
        self.tokenizer = None
        self.train_set = self.val_set = self.test_set = None

    def _lines(self) -> list[str]:
        c = self.cfg
        if c.path is None:
            return grammar_sentences(c.num_generated, c.seed)
        path = Path(c.path)
        return read_lines(path if path.is_absolute() or path.is_file() else Path(c.root) / path, c.lowercase)

    def setup(self, stage: str | None = None) -> None:
        if self.tokenizer is not None:
            return
        from tokenizers import Tokenizer  # imported when used: tokenizers
        from tokenizers.models import WordLevel
        from tokenizers.pre_tokenizers import WhitespaceSplit
        from tokenizers.trainers import WordLevelTrainer

        c = self.cfg
        lines = self._lines()
        n_val, n_test = int(len(lines) * c.val_fraction), int(len(lines) * c.test_fraction)
        if len(lines) - n_val - n_test < c.batch_size or n_val < 1 or n_test < 1:
            raise UserError(
                f"seqgan_text: {len(lines)} lines are too few for batch_size {c.batch_size} with "
                f"val/test fractions {c.val_fraction}/{c.test_fraction}; give a longer file"
            )
        order = torch.randperm(len(lines), generator=torch.Generator().manual_seed(c.seed)).tolist()
        test = [lines[i] for i in order[:n_test]]
        val = [lines[i] for i in order[n_test : n_test + n_val]]
        train = [lines[i] for i in order[n_test + n_val :]]
        tok = Tokenizer(WordLevel(unk_token="[UNK]"))
        tok.pre_tokenizer = WhitespaceSplit()
        tok.train_from_iterator(
            train, WordLevelTrainer(min_frequency=c.min_frequency, special_tokens=SPECIALS)
        )
        if tok.get_vocab_size() <= len(SPECIALS):  # every word would be [UNK]: G would learn nothing
            raise UserError(f"seqgan_text: no word of the training lines occurs data.min_frequency="
                            f"{c.min_frequency} times, so every word would be [UNK]; lower data.min_frequency")
        self.tokenizer = tok
        self.train_set, self.val_set, self.test_set = (Sequences(self.encode(s)) for s in (train, val, test))

    def encode(self, lines: list[str]) -> torch.Tensor:
        """Lines -> (N, max_len) ids: words, [EOS], [PAD]..."""
        T = self.cfg.max_len
        pad, eos = self.tokenizer.token_to_id("[PAD]"), self.tokenizer.token_to_id("[EOS]")
        out = torch.full((len(lines), T), pad, dtype=torch.long)
        for i, enc in enumerate(self.tokenizer.encode_batch(lines)):
            ids = enc.ids[: T - 1] + [eos]
            out[i, : len(ids)] = torch.tensor(ids)
        return out

    def info(self) -> dict:
        if self.tokenizer is None:
            raise UserError("seqgan_text: call setup() before info()")
        vocab = self.tokenizer.get_vocab()  # token -> id
        words = [w for w, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
        return {
            "vocab_size": len(words),
            "seq_len": self.cfg.max_len,
            "start_token": vocab["[BOS]"],
            "num_train": len(self.train_set),
            "vocab": words,
            "pad_token": vocab["[PAD]"],
            "eos_token": vocab["[EOS]"],
        }


def decode(seqs: torch.Tensor, vocab: list[str], stop: tuple[int, ...]) -> list[list[str]]:
    """(N, T) ids -> words, cut at the first id in ``stop`` ([EOS] / [PAD])."""
    out = []
    for row in seqs.tolist():
        words = []
        for i in row:
            if i in stop:
                break
            words.append(vocab[i])
        out.append(words)
    return out
