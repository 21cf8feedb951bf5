"""Vocabulary (Hugging Face `tokenizers` WordLevel) and the caption dataset / collate shared by
the shapes and Karpathy datamodules.

The vocabulary travels as a plain list of tokens (id = position) in ``datamodule.info()``, so it
is stored in every checkpoint and a loaded model decodes without the training data.
"""

# cpu file: datamodule: dataset items and collate (tests/platform/test_device_agnostic.py)

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from torch.utils.data import Dataset

PAD, START, END, UNK = "<pad>", "<start>", "<end>", "<unk>"
SPECIALS = [PAD, START, END, UNK]  # ids 0..3 in every vocabulary


def build_vocab(sentences: Iterable[str], min_freq: int = 1) -> list[str]:
    """Tokens ordered by id: the 4 specials, then words seen >= min_freq times (count descending,
    ties alphabetical: deterministic)."""
    tok = Tokenizer(models.WordLevel(unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.WordLevelTrainer(min_frequency=min_freq, special_tokens=SPECIALS, show_progress=False)
    tok.train_from_iterator(sentences, trainer)
    vocab = tok.get_vocab()
    return sorted(vocab, key=vocab.get)


class Vocab:
    """Token list <-> ids; encoding through a `tokenizers` WordLevel model built from the list."""

    def __init__(self, tokens: list[str]):
        if list(tokens[:4]) != SPECIALS:
            raise ValueError(f"vocabulary must start with {SPECIALS}, got {tokens[:4]}")
        self.tokens = list(tokens)
        self.index = {t: i for i, t in enumerate(self.tokens)}
        self._tok = Tokenizer(models.WordLevel(vocab=self.index, unk_token=UNK))
        self._tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        self.pad, self.start, self.end, self.unk = 0, 1, 2, 3

    def __len__(self) -> int:
        return len(self.tokens)

    def encode_batch(self, sentences: list[str], max_len: int) -> list[list[int]]:
        """Ids of each sentence wrapped as <start> w_1 .. w_n <end>, n <= max_len."""
        out = self._tok.encode_batch(list(sentences)) if sentences else []
        return [[self.start, *e.ids[:max_len], self.end] for e in out]

    def decode(self, ids: Iterable[int]) -> str:
        """Words up to the first <end>, specials dropped."""
        words = []
        for i in ids:
            i = int(i)
            if i == self.end:
                break
            if i >= 4:
                words.append(self.tokens[i])
            elif i == self.unk:
                words.append(UNK)
        return " ".join(words)

    def split(self, ids: Iterable[int]) -> list[str]:
        return self.decode(ids).split()


class CaptionSet(Dataset):
    """Items are (image, caption) pairs (training: every reference is an example, as in the
    paper) or images (evaluation: the first reference is the teacher-forced target, all
    references are returned for BLEU)."""

    def __init__(self, load_image: Callable[[int], torch.Tensor], refs: list[list[str]],
                 ids: list[list[list[int]]], pairs: bool, extra: Callable[[int], dict] | None = None):
        self.load_image, self.refs, self.ids, self.extra = load_image, refs, ids, extra
        self.items = ([(i, j) for i in range(len(refs)) for j in range(len(refs[i]))] if pairs
                      else [(i, 0) for i in range(len(refs))])

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, k: int) -> dict:
        i, j = self.items[k]
        item = {"image": self.load_image(i), "caption": torch.tensor(self.ids[i][j]), "refs": self.refs[i],
                "index": i}
        if self.extra is not None:
            item.update(self.extra(i))
        return item


def collate_captions(items: list[dict]) -> dict:
    """Stack images, right-pad captions with <pad> (id 0), keep references as lists of strings.

    caption: (B, T) = <start> w_1 .. w_n <end> <pad>..; ``length`` counts w_1..<end> (the predicted
    tokens)."""
    caps = [it["caption"] for it in items]
    T = max(len(c) for c in caps)
    caption = torch.zeros(len(caps), T, dtype=torch.long)
    for b, c in enumerate(caps):
        caption[b, : len(c)] = c
    batch = {"image": torch.stack([it["image"] for it in items]), "caption": caption,
             "length": torch.tensor([len(c) - 1 for c in caps]),
             "refs": [it["refs"] for it in items], "index": torch.tensor([it["index"] for it in items])}
    for key in items[0]:
        if key not in batch:
            batch[key] = torch.stack([torch.as_tensor(it[key]) for it in items])
    return batch


# the data options that decide each captioning datamodule's vocabulary (its words and their ids)
VOCAB_OPTIONS = {
    "shapes": ("the training scenes", ("n_train", "seed", "image_size", "max_objects"), "n_val and n_test do not"),
    "karpathy": ("the training captions", ("json", "min_freq", "limit_images", "restval_as_train"),
                 "image_size and max_len do not"),
}
KARPATHY_DATASETS = ("flickr8k", "flickr30k", "coco")


def vocab_difference(model: list[str], data: list[str], shown: int = 3) -> str:
    """A few of the words two vocabularies disagree on: in one only, or at other ids."""
    mine, theirs = {w: i for i, w in enumerate(model)}, {w: i for i, w in enumerate(data)}

    def some(words: list[str], say, sep: str = ", ") -> str:
        return sep.join(say(w) for w in words[:shown]) + (f"{sep}..." if len(words) > shown else "")

    parts = []
    if only := [w for w in model if w not in theirs]:
        parts.append(f"{len(only)} of the model's words are not in the data's ({some(only, repr)})")
    if only := [w for w in data if w not in mine]:
        parts.append(f"{len(only)} of the data's words are not in the model's ({some(only, repr)})")
    if moved := [w for w in data if w in mine and mine[w] != theirs[w]]:
        parts.append(f"{len(moved)} words have other ids ("
                     f"{some(moved, lambda w: f'{w!r} is {theirs[w]} here and {mine[w]} in the model', '; ')})")
    return "; ".join(parts) or f"{len(data)} words here, {len(model)} in the model"


def vocab_fix(trained: dict, info: dict) -> str:
    """How to get the model's vocabulary back: the options of this datamodule that decide it, and
    those of them (or the dataset) that visibly differ from the ones the model was trained with."""
    dataset = info.get("dataset")
    kind = "shapes" if dataset == "shapes" else "karpathy" if dataset in KARPATHY_DATASETS else None
    if kind is None:
        return "Use the dataset and data options the model was trained with"
    source, keys, unrelated = VOCAB_OPTIONS[kind]
    differ = [f"data.{k}={info[k]} here, {trained[k]} for the model" for k in keys
              if k in info and k in trained and info[k] != trained[k]]
    if trained.get("dataset") != dataset:
        differ.insert(0, f"the model was trained on {trained.get('dataset')}, this data is {dataset}")
    names = ", ".join(f"data.{k}" for k in keys[:-1]) + f" and data.{keys[-1]}"
    return (f"The {kind} vocabulary comes from {source}, which {names} decide ({unrelated})"
            + (f"; {'; '.join(differ)}" if differ else "")
            + ": use the values the model was trained with (zoo.evaluate takes them from the checkpoint or "
              "pretrained card unless data.KEY= overrides them)")
