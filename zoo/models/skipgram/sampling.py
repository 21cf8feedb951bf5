"""The three random pieces of word2vec's skip-gram, vectorised in torch.

- ``keep_probability``: frequent-word subsampling (word2vec / gensim formula).
- ``AliasSampler``: noise words from q(w) ~ count(w)^0.75 in O(1) per draw (Walker/Vose alias
  method: exact q, no 10^8-entry unigram table as in word2vec.c, two random numbers per draw).
- ``window_contexts`` / ``skipgram_pairs``: the dynamic window. Every centre position i draws a
  reduced half-width b_i ~ U{1..window} (word2vec's ``b = rand % window``), so near words are
  used more often than far ones; windows never cross a sentence boundary.
"""

from __future__ import annotations

import numpy as np
import torch


def keep_probability(counts: torch.Tensor, sample: float) -> torch.Tensor:
    """P(keep) of each word: (sqrt(f / t) + 1) * t / f with f = count / total, capped at 1.

    This is word2vec.c's ``(sqrt(cn / (sample * train_words)) + 1) * (sample * train_words) / cn``
    (gensim uses the same). Words rarer than about t are always kept; ``sample <= 0`` keeps all."""
    counts = torch.as_tensor(counts, dtype=torch.float64)
    if sample <= 0:
        return torch.ones(len(counts), device=counts.device)
    threshold = sample * counts.sum()
    keep = ((counts / threshold).sqrt() + 1.0) * threshold / counts.clamp(min=1)
    return keep.clamp(max=1.0).float()


def noise_distribution(counts: torch.Tensor, power: float = 0.75) -> torch.Tensor:
    """q(w) = count(w)^power / sum: the unigram distribution flattened (word2vec's 3/4 power)."""
    counts = torch.as_tensor(counts, dtype=torch.float64).clamp(min=0)
    q = counts.pow(power)
    if not torch.isfinite(q.sum()):  # a large power overflows (1000^1000): q would be NaN, sampled as uniform
        q = (counts / counts.max()).pow(power)  # the same q, scaled; kept out of the common path so that
        # the usual powers give bit-identical tables
    return q / q.sum()


class AliasSampler:
    """Draw from a fixed categorical distribution in O(1) per sample (Vose's alias method).

    Table i keeps outcome i with probability ``prob[i]``, else gives ``alias[i]``; drawing is a
    uniform column plus a coin, both vectorised, so a million noise words cost two ``torch.rand``."""

    def __init__(self, probs: torch.Tensor):
        p = np.asarray(torch.as_tensor(probs, dtype=torch.float64), dtype=np.float64)
        n = len(p)
        scaled = p * n / p.sum()
        prob, alias = np.ones(n), np.arange(n)
        small = [i for i in range(n) if scaled[i] < 1.0]
        large = [i for i in range(n) if scaled[i] >= 1.0]
        while small and large:
            s, g = small.pop(), large.pop()
            prob[s], alias[s] = scaled[s], g
            scaled[g] -= 1.0 - scaled[s]
            (small if scaled[g] < 1.0 else large).append(g)
        # leftovers (rounding) keep themselves with probability 1
        self.prob = torch.from_numpy(prob).float()  # (V,)
        self.alias = torch.from_numpy(alias).long()  # (V,)
        self.n = n
        self._tables: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}  # (prob, alias) per device

    def tables(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """(prob, alias) on ``device``, copied there once."""
        device = torch.device(device)
        if device not in self._tables:
            self._tables[device] = (self.prob.to(device), self.alias.to(device))
        return self._tables[device]

    def sample(self, shape: tuple[int, ...], generator: torch.Generator | None = None,
               device: torch.device | str | None = None) -> torch.Tensor:
        """Draws of the given shape on ``device`` (default: the generator's device, else the CPU)."""
        device = torch.device(device if device is not None else generator.device if generator is not None else "cpu")
        prob, alias = self.tables(device)
        column = torch.randint(0, self.n, shape, generator=generator, device=device)
        coin = torch.rand(shape, generator=generator, device=device)
        return torch.where(coin < prob[column], column, alias[column])


def offsets(half_width: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Relative context positions -b..-1, 1..b (on ``device``)."""
    return torch.cat([torch.arange(-half_width, 0, device=device), torch.arange(1, half_width + 1, device=device)])


def window_contexts(centres: torch.Tensor, half_width: int, sentence: torch.Tensor
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """Context positions of ``centres`` (all with the same reduced half-width b).

    centres: (B,) positions into the (subsampled) token stream; sentence: (N,) sentence id of
    every position. Returns positions (B, 2b), clamped into range, and validity (B, 2b): inside
    the stream and in the same sentence as the centre."""
    n = len(sentence)
    pos = centres[:, None] + offsets(half_width, centres.device)[None, :]  # (B, 2b)
    clamped = pos.clamp(0, n - 1)
    valid = (pos >= 0) & (pos < n) & (sentence[clamped] == sentence[centres][:, None])
    return clamped, valid


def skipgram_pairs(tokens: torch.Tensor, sentence: torch.Tensor, reduced: torch.Tensor
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """All (centre word, context word) pairs of a token stream, centre-major, contexts in
    left-to-right order. tokens, sentence, reduced: (N,). The reference the minibatch trainer's
    loop is tested against, and what ``full_softmax`` trains on."""
    centres, contexts = [], []
    positions = torch.arange(len(tokens), device=tokens.device)
    for b in reduced.unique().tolist():
        sel = positions[reduced == b]
        ctx, valid = window_contexts(sel, b, sentence)
        centres.append(sel[:, None].expand_as(ctx)[valid])
        contexts.append(ctx[valid])
    if not centres:
        return tokens.new_zeros(0), tokens.new_zeros(0)
    c, o = torch.cat(centres), torch.cat(contexts)
    order = torch.argsort(c * (len(tokens) + 1) + o, stable=True)
    return tokens[c[order]], tokens[o[order]]
