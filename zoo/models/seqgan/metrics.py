"""Text metrics for generated samples: corpus BLEU against held-out references and self-BLEU.

torchmetrics' ``BLEUScore`` does the clipped n-gram counting; BLEU-2, -3 and -4 are then read
from one metric's states (precisions of orders 1..k, uniform weights, the same brevity penalty),
so the references are counted once instead of once per order. Scores are on a 0-1 scale, like
the SeqGAN paper's tables.

- BLEU-k: every sample is scored against the whole reference set (the usual protocol for
  unconditional generation, as in the paper and Texygen), pooled over samples (corpus BLEU).
- self-BLEU-k (Zhu et al. 2018, Texygen): every sample against the *other* samples; high means
  the samples repeat each other (low diversity / mode collapse).
"""

from __future__ import annotations

import math


def _bleu_from_counts(
    numerator: list[float], denominator: list[float], preds_len: float, target_len: float, k: int
) -> float:
    """BLEU-k = BP * exp(mean_{n<=k} log p_n), p_n = clipped n-gram matches / n-grams in the samples."""
    num, den = numerator[:k], denominator[:k]
    if min(num) == 0 or preds_len == 0:
        return 0.0
    log_p = sum(math.log(a / b) for a, b in zip(num, den)) / k
    bp = 1.0 if preds_len > target_len else math.exp(1 - target_len / preds_len)
    return bp * math.exp(log_p)


def bleu_orders(
    preds: list[str], targets: list[list[str]], orders: tuple[int, ...] = (2, 3, 4)
) -> dict[int, float]:
    """Corpus BLEU of ``preds`` (strings of words) with per-pred reference lists ``targets``."""
    from torchmetrics.text import BLEUScore

    metric = BLEUScore(n_gram=max(orders))
    metric.update(preds, targets)
    num, den = metric.numerator.tolist(), metric.denominator.tolist()
    return {
        k: _bleu_from_counts(num, den, float(metric.preds_len), float(metric.target_len), k) for k in orders
    }


def bleu(samples: list[str], references: list[str], orders: tuple[int, ...] = (2, 3, 4)) -> dict[int, float]:
    """BLEU-k of generated sentences against a held-out reference set."""
    samples = [s for s in samples if s] or [""]
    return bleu_orders(samples, [references] * len(samples), orders)


def self_bleu(samples: list[str], orders: tuple[int, ...] = (2, 3, 4)) -> dict[int, float]:
    """Self-BLEU-k: each sample against all the others."""
    samples = [s for s in samples if s]
    if len(samples) < 2:
        return {k: 0.0 for k in orders}
    others = [samples[:i] + samples[i + 1 :] for i in range(len(samples))]
    return bleu_orders(samples, others, orders)
