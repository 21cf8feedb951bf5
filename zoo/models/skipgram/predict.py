"""Skip-gram's inference API (a mixin of ``SkipGramModule``) and ``python -m zoo.predict`` for it.

    model = zoo.load("skipgram-synthetic")
    model.vocabulary[:5]                  # the words, most frequent first
    model.vector("w0_0")                  # (D,) its vector (the centre table, word2vec's syn0)
    model.most_similar("w0_0", topn=5)    # [(word, cosine), ...], the word itself left out
    model.similarity("w0_0", "w0_1")      # cosine similarity, a float
    model.analogy("a", "b", "c")          # the words closest to b - a + c (a : b = c : ?)
    model.save_word2vec("vectors.bin", binary=True)   # the text or binary format gensim reads

A word is looked up as given, then lower-cased; an unknown word is a UserError naming the closest known
ones. Vectors are tensors on the model's device; scores are floats.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from zoo.core.inputs import check_count
from zoo.errors import UserError
from zoo.models.skipgram.evaluation import nearest
from zoo.models.skipgram.export import save_word2vec
from zoo.paths import check_output_file
from zoo.schema import at_least, validate


class SkipGramAPI:
    """Needs ``words``, ``index`` and ``vectors`` (module.py)."""

    @property
    def vocabulary(self) -> list[str]:
        """The model's words, most frequent first (id order)."""
        return list(self.words)

    def word_id(self, word: str) -> int:
        if not isinstance(word, str):
            raise UserError(f"a word is a string, got {type(word).__name__}")
        for w in (word, word.lower()):
            if w in self.index:
                return self.index[w]
        close = difflib.get_close_matches(word, self.words, n=5, cutoff=0.6)
        hint = f"; the closest known: {', '.join(close)}" if close else f"; e.g. {', '.join(self.words[:5])}"
        raise UserError(f"'{word}' is not in the vocabulary ({len(self.words)} words, min_count applied){hint}")

    @torch.no_grad()
    def vector(self, word: str) -> Tensor:
        """The word's vector (D,) (the centre table, word2vec's syn0)."""
        return self.vectors[self.word_id(word)]

    @torch.no_grad()
    def most_similar(self, word: str | Tensor, topn: int = 10) -> list[tuple[str, float]]:
        """The ``topn`` words of highest cosine similarity to a word (itself left out) or to a vector (D,)."""
        check_count(topn, "topn")
        if isinstance(word, Tensor):
            if word.shape != (self.vectors.shape[1],):
                raise UserError(f"a query vector has shape ({self.vectors.shape[1]},), got {tuple(word.shape)}")
            query, exclude = word.to(self.vectors.device)[None], None
        else:
            i = self.word_id(word)
            query, exclude = self.vectors[i][None], torch.tensor([[i]], device=self.vectors.device)
        sims, idx = nearest(self.vectors, query, topn, exclude=exclude)
        return [(self.words[j], s) for s, j in zip(sims[0].tolist(), idx[0].tolist())]

    @torch.no_grad()
    def similarity(self, a: str, b: str) -> float:
        """Cosine similarity of two words' vectors."""
        return float(F.cosine_similarity(self.vector(a).float(), self.vector(b).float(), dim=0))

    @torch.no_grad()
    def analogy(self, a: str, b: str, c: str, topn: int = 5) -> list[tuple[str, float]]:
        """The words closest to b - a + c (a : b = c : ?) by cosine over unit vectors, a, b, c left out."""
        check_count(topn, "topn")
        ids = torch.tensor([[self.word_id(a), self.word_id(b), self.word_id(c)]], device=self.vectors.device)
        v = F.normalize(self.vectors.float(), dim=1)
        sims, idx = nearest(self.vectors, v[ids[:, 1]] - v[ids[:, 0]] + v[ids[:, 2]], topn, exclude=ids)
        return [(self.words[j], s) for s, j in zip(sims[0].tolist(), idx[0].tolist())]

    def save_word2vec(self, path: str | Path, binary: bool = False) -> Path:
        """Write the vectors in word2vec's text format (or its binary one, ``binary``), which gensim's
        ``KeyedVectors.load_word2vec_format(path, binary=...)`` reads. Returns the path."""
        return save_word2vec(path, self.words, self.vectors, bool(binary))

    def neighbour_table(self, words: list[str], topn: int = 10) -> str:
        """Lines 'word: neighbour cosine, ...' for the known ones of ``words``."""
        known = [w for w in words if w in self.index or w.lower() in self.index]
        if not known:
            return "no probe word is in the vocabulary"
        return "\n".join(f"{w}: " + ", ".join(f"{n} {s:.2f}" for n, s in self.most_similar(w, topn)) for w in known)


@dataclass
class PredictOptions:
    """``python -m zoo.predict skipgram-synthetic [words ...] key=value``."""

    topn: int = at_least(10, 1)  # neighbours per word
    analogy: str = ""  # a,b,c: the words nearest b - a + c
    export: str = ""  # write the vectors in word2vec format here
    binary: Optional[bool] = None  # export's format (None: binary when the file ends in .bin)


def predict_cli(model: Any, inputs: list[str], options: dict) -> None:
    """``python -m zoo.predict TARGET king queen [topn=10] [analogy=man,king,woman] [export=vectors.bin]``:
    nearest neighbours, a - b + c, or the vectors in word2vec format (binary: by default for .bin)."""
    opts = validate(PredictOptions, options, "skipgram", what="option")
    if not inputs and not opts["analogy"] and not opts["export"]:
        raise UserError("give words to look up, analogy=a,b,c (a : b = c : ?) or export=vectors.bin")
    parts = str(opts["analogy"]).split(",") if opts["analogy"] else []
    if parts and len(parts) != 3:  # checked before anything is printed
        raise UserError(f"analogy=a,b,c takes three words (a : b = c : ?), got '{opts['analogy']}'")
    if opts["export"]:  # checked before anything is printed; its folder is created when written

        check_output_file(str(opts["export"]), "export", writer=None, example="vectors.bin")
    if inputs:
        missing = [w for w in inputs if w not in model.index and w.lower() not in model.index]
        if len(missing) == len(inputs):  # nothing to show: a mistake, not a result
            raise UserError(f"not in the vocabulary: {', '.join(missing)} ({len(model.words)} words, "
                            f"min_count applied; e.g. {', '.join(model.words[:5])})")
        print(model.neighbour_table(inputs, int(opts["topn"])))
        if missing:  # some words known: their neighbours above, the others named
            print(f"not in the vocabulary: {', '.join(missing)}")
    if parts:
        answers = model.analogy(*parts, topn=int(opts["topn"]))
        print(f"{parts[0]} : {parts[1]} = {parts[2]} : " + ", ".join(f"{w} {s:.2f}" for w, s in answers))
    if opts["export"]:
        export = str(opts["export"])
        binary = Path(export).suffix == ".bin" if opts["binary"] is None else opts["binary"]
        path = model.save_word2vec(export, binary)
        print(f"wrote {len(model.words)} vectors of size {model.cfg.dim} to {path}")
