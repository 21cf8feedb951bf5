"""Intrinsic evaluation of word vectors: similarity (Spearman), analogies, nearest neighbours.

File formats read (all used by gensim's ``evaluate_word_pairs`` / ``evaluate_word_analogies``):
- word similarity, WordSim353 style: ``word1<TAB or ,>word2<TAB or ,>score``, ``#`` comments, an
  optional header line (``Word 1,Word 2,Human (mean)`` in the original ``combined.csv``);
- SimLex-999 original: a header ``word1 word2 POS SimLex999 conc(w1) ...`` (tab separated): the
  score is the ``SimLex999`` column; gensim's copy is in the WordSim style;
- analogies, word2vec's ``questions-words.txt``: ``: section`` lines, then ``a b c d`` meaning
  a : b = c : d, answered by the nearest word to b - a + c (a, b, c excluded) among the
  ``restrict`` most frequent words, as word2vec's ``compute-accuracy`` does (30,000).
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from scipy.stats import spearmanr

from zoo.core.files import open_utf8
from zoo.errors import UserError


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def read_similarity(path: str | Path) -> list[tuple[str, str, float]]:
    """(word1, word2, score) triples of a WordSim353 / SimLex-999 style file."""
    pairs: list[tuple[str, str, float]] = []
    score_col = 2
    with open_utf8(path, "similarity file") as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            cols = [c.strip() for c in (line.split("\t") if "\t" in line else line.split(","))]
            if len(cols) < 3:
                cols = line.split()
            if len(cols) < 3:
                raise UserError(f"{path}:{lineno}: expected 'word1 word2 score', got {line!r}")
            if not pairs and _float(cols[score_col]) is None:  # a header line
                names = [c.lower() for c in cols]
                score_col = names.index("simlex999") if "simlex999" in names else score_col
                continue
            score = _float(cols[score_col])
            if score is None:
                raise UserError(f"{path}:{lineno}: score column {score_col + 1} is not a number: {line!r}")
            pairs.append((cols[0], cols[1], score))
    if not pairs:
        raise UserError(f"{path}: no word pairs found (expected 'word1<TAB>word2<TAB>score' lines)")
    return pairs


def read_analogies(path: str | Path) -> list[tuple[str, list[tuple[str, str, str, str]]]]:
    """[(section, [(a, b, c, d), ...]), ...] of a questions-words.txt style file."""
    sections: list[tuple[str, list]] = []
    with open_utf8(path, "analogy file") as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            if line.startswith(":"):
                sections.append((line[1:].strip(), []))
                continue
            words = line.split()
            if len(words) != 4:
                raise UserError(f"{path}:{lineno}: an analogy line has 4 words 'a b c d', got {line!r}")
            if not sections:
                sections.append(("analogies", []))
            sections[-1][1].append(tuple(words))
    if not any(q for _, q in sections):
        raise UserError(f"{path}: no analogy questions found (expected ': section' and 'a b c d' lines)")
    return sections


def spearman(a: torch.Tensor, b: torch.Tensor) -> float:
    """Spearman rank correlation (ties get their average rank), via scipy."""
    if len(a) < 2 or bool((a == a[0]).all()) or bool((b == b[0]).all()):
        return float("nan")  # undefined (scipy too gives nan, with a ConstantInputWarning: an error under -W error)
    return float(spearmanr(a.cpu().numpy(), b.cpu().numpy()).statistic)


MIN_PAIRS = 10  # fewer pairs in the vocabulary: no Spearman (nan); its standard error is ~1/sqrt(n - 1)


def similarity_score(vectors: torch.Tensor, index: dict[str, int], pairs: list, lowercase: bool = False
                     ) -> dict[str, float]:
    """Spearman between human scores and cosine similarities over the pairs whose both words are
    in the vocabulary (nan with fewer than MIN_PAIRS of them); ``oov`` is the fraction of pairs skipped."""
    norm = lambda w: w.lower() if lowercase else w  # noqa: E731
    known = [(index[norm(a)], index[norm(b)], s) for a, b, s in pairs
             if norm(a) in index and norm(b) in index]
    oov = 1 - len(known) / len(pairs)
    if len(known) < MIN_PAIRS:  # 2 pairs give a Spearman of exactly 1.0: no score
        return {"spearman": float("nan"), "oov": oov, "pairs": float(len(known))}
    i, j, s = (torch.tensor(col, device=vectors.device) for col in zip(*known))
    v = F.normalize(vectors.detach().float(), dim=1)
    cos = (v[i] * v[j]).sum(1)
    return {"spearman": spearman(cos, s.float()), "oov": oov, "pairs": float(len(known))}


def analogy_score(vectors: torch.Tensor, index: dict[str, int], sections: list, restrict: int = 30000,
                  lowercase: bool = False, batch: int = 2048) -> dict[str, float]:
    """Accuracy per section and overall (``all``), plus ``semantic`` / ``syntactic`` (sections named
    ``gram*`` are syntactic, as in word2vec) and ``oov`` (questions skipped: a word outside the
    ``restrict`` most frequent). Vocabulary ids must be in frequency order."""
    v = F.normalize(vectors[:restrict].detach().float(), dim=1)  # (R, D)
    norm = lambda w: w.lower() if lowercase else w  # noqa: E731
    out: dict[str, float] = {}
    totals = {"all": [0, 0], "semantic": [0, 0], "syntactic": [0, 0]}
    n_questions = 0
    for name, questions in sections:
        n_questions += len(questions)
        ids = [[index.get(norm(w), restrict) for w in q] for q in questions]
        ids = torch.tensor([q for q in ids if max(q) < restrict], dtype=torch.long, device=v.device).view(-1, 4)
        correct = 0
        for start in range(0, len(ids), batch):
            q = ids[start:start + batch]  # (n, 4)
            target = v[q[:, 1]] - v[q[:, 0]] + v[q[:, 2]]  # (n, D)
            sims = F.normalize(target, dim=1) @ v.T  # (n, R)
            sims.scatter_(1, q[:, :3], float("-inf"))  # the question words are not answers
            correct += int((sims.argmax(1) == q[:, 3]).sum())
        if len(ids):
            out[name] = correct / len(ids)
        kind = "syntactic" if name.startswith("gram") else "semantic"
        for key in ("all", kind):
            totals[key][0] += correct
            totals[key][1] += len(ids)
    for key, (c, n) in totals.items():
        if n:
            out[key] = c / n
    out["oov"] = 1 - totals["all"][1] / max(1, n_questions)
    return out


def nearest(vectors: torch.Tensor, query: torch.Tensor, topn: int = 10, exclude: torch.Tensor | None = None
            ) -> tuple[torch.Tensor, torch.Tensor]:
    """Cosine nearest neighbours. query: (n, D) vectors; exclude: (n, m) ids never returned.
    Returns (similarities (n, topn), ids (n, topn))."""
    v = F.normalize(vectors.detach().float(), dim=1)
    sims = F.normalize(query.detach().float(), dim=1) @ v.T  # (n, V)
    if exclude is not None:
        sims.scatter_(1, exclude, float("-inf"))
    return sims.topk(min(topn, sims.shape[1]), dim=1)
