"""Vocabulary (Hugging Face `tokenizers` WordLevel) and the caption dataset / collate shared by
the shapes and Karpathy datamodules.

The vocabulary travels as a plain list of tokens (id = position) in ``datamodule.info()``, so it
is stored in every checkpoint and a loaded model decodes without the training data.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from torch.utils.data import Dataset

PAD, START, END, UNK = "<pad>", "<start>", "<end>", "<unk>"
SPECIALS = [PAD, START, END, UNK]  # ids 0..3 in every vocabulary


def build_vocab(sentences: Iterable[str], min_freq: int = 1) -> list[str]:
    """Tokens ordered by id: the 4 specials, then words seen >= min_freq times (count descending,
    ties alphabetical: deterministic)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.WordLevel(unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.WordLevelTrainer(min_frequency=min_freq, special_tokens=SPECIALS, show_progress=False)
    tok.train_from_iterator(sentences, trainer)
    vocab = tok.get_vocab()
    return sorted(vocab, key=vocab.get)


class Vocab:
    """Token list <-> ids; encoding through a `tokenizers` WordLevel model built from the list."""

    def __init__(self, tokens: list[str]):
        from tokenizers import Tokenizer, models, pre_tokenizers

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
