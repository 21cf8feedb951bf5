"""What SeqGAN measures: validation / test metrics (inference and ``python -m zoo.predict``: predict.py).

- ``{val,test}/nll``: G's per-token NLL of held-out real sequences (teacher forcing; text: the words
  and [EOS], not the padding after it).
- ``{val,test}/d_acc``: D's accuracy on held-out real sequences vs as many fresh G samples; its two
  halves ``d_real`` (held-out reals called real) and ``d_fake`` (samples called fake), and
  ``test/d_train_real`` (training sequences called real: far above ``d_real``, D has learnt the
  training set rather than the data).
- oracle data: ``{val,test}/nll_oracle`` (NLL-oracle of ``eval_samples`` / ``test_samples`` G samples,
  a fixed seed); the test also reports ``test/nll_oracle_floor`` (the oracle's own samples) and
  ``test/nll_oracle_random`` (an untrained generator initialised like G) and, after adversarial
  training, ``test/nll_oracle_mle`` (G as it was when adversarial training started).
- text data: ``val/bleu3``; ``test/bleu{2,3,4}`` against the held-out sentences and
  ``test/self_bleu{2,3,4}`` (0-1 scale); after adversarial training also ``..._mle`` for G as it
  was before it.
Validation metrics of G are computed once per G version (they are cached while only D trains).

Text metrics for generated samples: corpus BLEU against held-out references and self-BLEU.

BLEU-2, -3 and -4 are read from one set of clipped n-gram counts (precisions of orders 1..k,
uniform weights, the same brevity penalty). Scores are on a 0-1 scale, like the SeqGAN paper's
tables. torchmetrics' ``BLEUScore`` counts the n-grams of every reference again for every sample,
which is O(samples x references): 200 samples against 300 references take it 3.4 s, and self-BLEU
of 200 samples 2.0 s (`benchmarks/seqgan_bleu.py`). Here every sample meets the same references (or
all the others), so each n-gram's largest count over the references is found once (for self-BLEU:
the largest two, so that a sample's own count can be left out), and the result is the number
torchmetrics gives (``bleu_orders``; tested equal), in O(samples + references).

- BLEU-k: every sample is scored against the whole reference set (the usual protocol for
  unconditional generation, as in the paper and Texygen), pooled over samples (corpus BLEU).
- self-BLEU-k (Zhu et al. 2018, Texygen): every sample against the *other* samples; high means
  the samples repeat each other (low diversity / mode collapse).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import torch
from torchmetrics.text import BLEUScore

from zoo.models.seqgan.data import decode
from zoo.models.seqgan.nets import LSTMLM
from zoo.models.seqgan.oracle import nll_oracle
from zoo.models.seqgan.plots import nll_curve_figure


class SeqGANEvaluation:
    """The evaluation half of the SeqGAN LightningModule (``SeqGAN`` derives from it): its validation
    and test metrics, as methods on the model's own state."""

    # set by SeqGAN: gen, dis, oracle, gen_mle, cfg, data_info, seq_len, text, schedule, history,
    # g_version, rollout_ready; here: _refs (held-out sentences of the epoch), _eval_cache

    def eval_step(self, batch: torch.Tensor, batch_idx: int, split: str) -> None:
        B = batch.shape[0]
        log_p = self.gen.log_prob(batch)  # (B, T)
        if self.text:  # the words up to and with [EOS]: the [PAD]s after it are free and would halve the NLL
            eos = self.data_info["eos_token"]
            ended_before = torch.cumsum((batch == eos).long(), dim=1) - (batch == eos).long()  # (B, T)
            counted = ended_before == 0
            nll = -(log_p * counted).sum() / counted.sum()
        else:
            nll = -log_p.mean()
        g = torch.Generator(device=batch.device).manual_seed(self.cfg.eval_seed * 7 + batch_idx)
        fake = self.gen.sample(B, self.seq_len, generator=g)
        logits = self.dis(torch.cat([batch, fake]))
        real, caught = (logits[:B] > 0).float(), (logits[B:] <= 0).float()
        self.log_dict({f"{split}/nll": nll, f"{split}/d_acc": torch.cat([real, caught]).mean(),
                       f"{split}/d_real": real.mean(), f"{split}/d_fake": caught.mean()},
                      batch_size=B, sync_dist=True)
        if self.text:
            self._refs.extend(self.sentences(batch))

    def sentences(self, seqs: torch.Tensor) -> list[str]:
        d = self.data_info
        return [" ".join(w) for w in decode(seqs.cpu(), d["vocab"], (d["eos_token"], d["pad_token"]))]

    def sample_sequences(self, n: int, seed: int, gen: Any = None) -> torch.Tensor:
        """n samples (n, T) of G (or of ``gen``) from a fixed seed (the public ``generate`` is predict.py's)."""
        gen = gen or self.gen
        g = torch.Generator(device=gen.head.weight.device).manual_seed(seed)
        return torch.cat([gen.sample(min(1000, n - i), self.seq_len, generator=g) for i in range(0, n, 1000)])

    def _n(self, n: int) -> int:
        """Fewer evaluation samples under ``trainer.fast_dev_run`` (a smoke test, not a measurement)."""
        return min(n, 200) if self._trainer is not None and self.trainer.fast_dev_run else n

    def log_val_metrics(self) -> None:
        c = self.cfg
        key = self.g_version
        if key not in self._eval_cache:
            if self.oracle is not None:
                value = nll_oracle(self.oracle, self.gen, self._n(c.eval_samples), self.seq_len, c.eval_seed)
            elif self.text:
                samples = self.sentences(self.sample_sequences(c.bleu_samples, c.eval_seed))
                value = bleu(samples, self._refs[: c.bleu_refs], (3,))[3]
            else:
                value = None
            self._eval_cache = {key: value}
            if value is not None:
                phase = self.schedule.phase(self.current_epoch).kind
                self.history.append((int(self.current_epoch), phase, float(value)))
        value = self._eval_cache[key]
        if value is not None:
            self.log("val/nll_oracle" if self.oracle is not None else "val/bleu3", value, prog_bar=True)

    def log_test_metrics(self) -> None:
        c = self.cfg
        metrics, floor = {}, None
        if self.oracle is not None:
            metrics["test/nll_oracle"] = nll_oracle(
                self.oracle, self.gen, c.test_samples, self.seq_len, c.eval_seed + 1
            )
            floor = nll_oracle(self.oracle, self.oracle, c.test_samples, self.seq_len, c.eval_seed + 2)
            g = torch.Generator(device=self.device).manual_seed(c.eval_seed + 3)
            random_g = LSTMLM(self.gen.vocab_size, c.gen_emb_dim, c.gen_hidden_dim, self.gen.start_token)
            random_g = random_g.init_normal(c.gen_init_std, g).to(self.device, self.dtype)
            metrics["test/nll_oracle_floor"] = floor
            if int(self.rollout_ready):  # adversarial training happened: also score G as it was before it
                metrics["test/nll_oracle_mle"] = nll_oracle(
                    self.oracle, self.gen_mle, c.test_samples, self.seq_len, c.eval_seed + 1
                )
            metrics["test/nll_oracle_random"] = nll_oracle(
                self.oracle, random_g, c.test_samples, self.seq_len, c.eval_seed + 4
            )
        if self.text:
            samples = self.sentences(self.sample_sequences(c.test_bleu_samples, c.eval_seed + 1))
            for k, v in bleu(samples, self._refs[: c.bleu_refs]).items():
                metrics[f"test/bleu{k}"] = v
            for k, v in self_bleu(samples).items():
                metrics[f"test/self_bleu{k}"] = v
            if int(self.rollout_ready):  # the same for G as it was before adversarial training
                before = self.sentences(self.sample_sequences(c.test_bleu_samples, c.eval_seed + 1, self.gen_mle))
                metrics.update(
                    {f"test/bleu{k}_mle": v for k, v in bleu(before, self._refs[: c.bleu_refs]).items()}
                )
                metrics.update({f"test/self_bleu{k}_mle": v for k, v in self_bleu(before).items()})
            if self._trainer is None or self.trainer.is_global_zero:
                (self._plots_dir() / "test_samples.txt").write_text("\n".join(samples) + "\n")
        train = getattr(getattr(getattr(self._trainer, "datamodule", None), "train_set", None), "seqs", None)
        if train is not None:  # held-out d_real far below this: D knows the training set, not the data
            n = min(len(train), c.test_samples)
            seqs = train[:n].to(self.device)
            metrics["test/d_train_real"] = torch.cat([self.dis(seqs[i:i + 1000]) > 0 for i in range(0, n, 1000)]
                                                     ).float().mean().item()
        self.log_dict(metrics, sync_dist=True)
        if self.history:
            self.save_figure(
                "nll_oracle" if self.oracle is not None else "val_bleu3",
                nll_curve_figure(self.history, self.schedule, floor),
            )


# ----------------------------------------------------------------------
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
    metric = BLEUScore(n_gram=max(orders))
    metric.update(preds, targets)
    num, den = metric.numerator.tolist(), metric.denominator.tolist()
    return {
        k: _bleu_from_counts(num, den, float(metric.preds_len), float(metric.target_len), k) for k in orders
    }


def ngram_counts(words: list[str], n: int) -> Counter:
    """Every 1..n-gram of ``words`` (tuples) with its count."""
    return Counter(tuple(words[j:j + k]) for k in range(1, n + 1) for j in range(len(words) - k + 1))


def _length_table(lengths: list[int]) -> list[tuple[int, int]]:
    """(position, length) of the first two samples of each distinct length, in order: with any one position
    left out, the first of each length is still there, so the closest pick below is the same as over all."""
    positions: dict[int, list[int]] = {}
    for i, length in enumerate(lengths):
        if len(positions.setdefault(length, [])) < 2:
            positions[length].append(i)
    return sorted((i, length) for length, pos in positions.items() for i in pos)


def _closest(length: int, table: list[tuple[int, int]], skip: int = -1) -> int:
    """The reference length closest to ``length`` (a ``_length_table``, position ``skip`` left out), the first
    in order on a tie, as torchmetrics' BLEU picks it for the brevity penalty."""
    best = None
    for i, ref in table:
        if i != skip and (best is None or abs(length - ref) < abs(length - best)):
            best = ref
    return best


class _Counts:
    """Clipped n-gram matches and n-grams per order, and the lengths for the brevity penalty."""

    def __init__(self, n: int):
        self.num, self.den, self.preds_len, self.target_len = [0.0] * n, [0.0] * n, 0.0, 0.0

    def add(self, pred: Counter, ref_max, length: int, ref_length: int) -> None:
        """``ref_max(gram, count)``: the gram's largest count in this sample's references."""
        for gram, c in pred.items():
            self.den[len(gram) - 1] += c
            self.num[len(gram) - 1] += min(c, ref_max(gram, c))
        self.preds_len += length
        self.target_len += ref_length

    def scores(self, orders: tuple[int, ...]) -> dict[int, float]:
        return {k: _bleu_from_counts(self.num, self.den, self.preds_len, self.target_len, k) for k in orders}


def bleu(samples: list[str], references: list[str], orders: tuple[int, ...] = (2, 3, 4)) -> dict[int, float]:
    """BLEU-k of generated sentences against a held-out reference set (every sample meets all of it)."""
    samples = [s for s in samples if s] or [""]
    n = max(orders)
    refs = [r.split() for r in references]
    ref_max: Counter = Counter()
    for r in refs:
        ref_max |= ngram_counts(r, n)  # each gram's largest count over the references
    lengths = _length_table([len(r) for r in refs])
    counts = _Counts(n)
    for s in samples:
        words = s.split()
        counts.add(ngram_counts(words, n), lambda gram, c: ref_max[gram], len(words), _closest(len(words), lengths))
    return counts.scores(orders)


def self_bleu(samples: list[str], orders: tuple[int, ...] = (2, 3, 4)) -> dict[int, float]:
    """Self-BLEU-k: each sample against all the others."""
    samples = [s for s in samples if s]
    if len(samples) < 2:
        return {k: 0.0 for k in orders}
    n = max(orders)
    words = [s.split() for s in samples]
    grams = [ngram_counts(w, n) for w in words]
    top: dict[tuple, list[int]] = {}  # gram -> [largest count, how many samples have it, second largest]
    for g in grams:
        for gram, c in g.items():
            t = top.setdefault(gram, [0, 0, 0])
            if c > t[0]:
                t[:] = [c, 1, t[0]]
            elif c == t[0]:
                t[1] += 1
            elif c > t[2]:
                t[2] = c

    def others_max(gram: tuple, c: int) -> int:  # the largest count among the other samples
        best, holders, second = top[gram]
        return second if c == best and holders == 1 else best

    lengths = _length_table([len(w) for w in words])
    counts = _Counts(n)
    for i, (w, g) in enumerate(zip(words, grams)):
        counts.add(g, others_max, len(w), _closest(len(w), lengths, skip=i))
    return counts.scores(orders)
