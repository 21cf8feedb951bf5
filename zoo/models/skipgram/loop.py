"""The hot loop: one subsampled chunk of the corpus -> many vectorised SGD updates.

A Lightning ``training_step`` gets a chunk (~10^5-10^6 words) and calls ``train_chunk``: the
chunk is cut into minibatches of ``batch_centres`` window centres, and a minibatch is trained in
one of two orders (``window_pairs``):

- ``in_turn`` (default): one ``SkipGram.sgd_windows`` call per context offset, -W..-1 then 1..W,
  each on the (P, 1) block of the minibatch's pairs at that offset. So every window's contexts
  take turns, left to right, as in word2vec: a context's step sees the centre's output vector as
  the previous context's step left it. That is a second-order effect per pair (v_j2 gains
  lr^2 g1 g2 v_j1: contexts of one window are drawn towards each other), but it is systematic: with
  all of a window's pairs at once the word vectors end up 5-15 % shorter than gensim's and the
  embedding further from it, at any minibatch size, even one window (docs/skipgram.md).
- ``at_once``: the centres are bucketed by their reduced half-width b (1..window), a bucket is a
  dense (centres, 2b) block with no padding and one call: all pairs of a window from the same
  vectors (Ji et al. 2016), with one draw of noise words per window (``share_negatives``). Fewer,
  larger calls.

A minibatch is ``batch_centres`` consecutive windows (``interleave=1``), or every s-th window of
s * batch_centres consecutive ones (``interleave=s``; 0 = s is the chunk's number of minibatches):
B streams of s consecutive windows stepped together, so a word a passage repeats is not updated
many times in one step.

The learning rate falls linearly across the chunk (word2vec decays it per word). Per-step
Lightning overhead is paid once per chunk, not once per minibatch.

``threads > 1`` runs the minibatches Hogwild-style (as word2vec.c and gensim do with worker
threads): T Python threads, each with single-threaded torch ops (which release the GIL),
update the shared tables without locks. Faster on several cores; not bit-for-bit reproducible
(neither is gensim with workers > 1). ``threads=1`` is deterministic given the seed. On a tiny
vocabulary, where Hogwild is unsafe, ``intra_op_threads`` parallelises the (dense) ops instead.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import torch

from zoo.models.skipgram.config import WINDOW_PAIRS
from zoo.models.skipgram.nets import SkipGram
from zoo.models.skipgram.sampling import offsets, window_contexts
from zoo.models.skipgram.threads import torch_threads


def train_chunk(net: SkipGram, tokens: torch.Tensor, sentence: torch.Tensor, window: torch.Tensor,
                max_window: int, lr_start: float, lr_end: float, batch_centres: int = 4096, seed: int = 0,
                threads: int = 1, share_negatives: bool = True, intra_op_threads: int = 1,
                replicas: int = 1, window_pairs: str = "in_turn", interleave: int = 1) -> dict[str, float]:
    """SGD over every (context -> centre) pair of a chunk.

    tokens, sentence, window: (N,) subsampled word ids, sentence numbers, reduced half-widths.
    Returns {"loss": mean loss per pair on the first minibatch of each thread, "pairs": pairs
    trained}."""
    if window_pairs not in WINDOW_PAIRS:
        raise ValueError(f"window_pairs must be one of {WINDOW_PAIRS}, got {window_pairs!r}")
    if interleave < 0:
        raise ValueError(f"interleave must be >= 0, got {interleave}")
    n = len(tokens)
    n_batches = max(1, math.ceil(n / batch_centres))
    span = interleave or n_batches  # minibatches whose windows interleave

    def minibatch(k: int) -> torch.Tensor:
        """Centre positions of minibatch k: (B,). Every run of ``span`` minibatches covers span * B
        consecutive windows, and minibatch j of the run takes every span-th of them, from the j-th."""
        start = (k // span) * span * batch_centres
        length = min(span * batch_centres, n - start)
        step = max(1, math.ceil(length / batch_centres))  # the run's minibatches (fewer in a chunk's last run)
        return torch.arange(start + k % span, start + length, step, device=tokens.device)

    reach = offsets(max_window, tokens.device).abs()  # (2W,): -W..-1, 1..W, a window's contexts left to right

    def in_turn(centres: torch.Tensor, lr: float, g: torch.Generator, with_loss: bool) -> tuple:
        """The minibatch's pairs offset by offset: (P, 1) blocks, each window's contexts in turn.
        The pairs of all offsets are selected at once (two host syncs a minibatch on a GPU, not
        three per offset)."""
        loss, pairs = 0.0, 0
        pos, valid = window_contexts(centres, max_window, sentence)  # (B, 2W)
        valid &= window[centres][:, None] >= reach  # inside each centre's reduced window
        per_offset = valid.sum(0).tolist()  # (2W,) pairs at each offset
        slot, row = valid.T.nonzero(as_tuple=True)  # (P,) offset-major, centres in order within an offset
        context_words = tokens[pos[row, slot]].split(per_offset)
        centre_words = tokens[centres[row]].split(per_offset)
        all_valid = torch.ones(max(per_offset), 1, dtype=torch.bool, device=tokens.device)  # each call's, a view
        for context_word, centre_word in zip(context_words, centre_words):
            if len(centre_word):
                l, p = net.sgd_windows(context_word[:, None], all_valid[:len(centre_word)], centre_word, lr, g,
                                       share_negatives, with_loss)
                loss, pairs = loss + l, pairs + p
        return loss, pairs

    def at_once(batch: torch.Tensor, lr: float, g: torch.Generator, with_loss: bool) -> tuple:
        """The minibatch's windows bucketed by half-width b: (centres, 2b) blocks, all pairs at once.
        The contexts are found once at the full width W; bucket b's block is a view of them, its
        rows and the 2b middle columns (offsets -b..-1, 1..b), so a bucket launches no work to find them."""
        loss, pairs = 0.0, 0
        wb = window[batch]
        order = batch[torch.argsort(wb, stable=True)]  # centres grouped by half-width
        sizes = torch.bincount(wb, minlength=max_window + 1).tolist()
        ctx_pos, valid = window_contexts(order, max_window, sentence)  # (B, 2W)
        context_words, centre_words = tokens[ctx_pos], tokens[order]
        done = 0
        for b in range(1, max_window + 1):
            if not sizes[b]:
                continue
            rows, cols = slice(done, done + sizes[b]), slice(max_window - b, max_window + b)
            done += sizes[b]
            l, p = net.sgd_windows(context_words[rows, cols], valid[rows, cols], centre_words[rows], lr, g,
                                   share_negatives, with_loss)
            loss, pairs = loss + l, pairs + p
        return loss, pairs

    train_minibatch = in_turn if window_pairs == "in_turn" else at_once

    # in_turn / at_once return (summed loss, pairs) and run (loss, its pairs, all pairs): 0-dim tensors (or
    # 0), read once at the chunk's end, since on a GPU each read holds the host until the queue drains
    def run(thread: int) -> tuple:
        g = torch.Generator(device=tokens.device).manual_seed((seed * 7919 + thread) % (1 << 62))
        loss, loss_pairs, pairs = 0.0, 0, 0
        for k in range(thread, n_batches, threads):
            lr = lr_start + (lr_end - lr_start) * k / n_batches
            first = k == thread
            l, p = train_minibatch(minibatch(k), lr, g, first)
            pairs += p
            if first:
                loss, loss_pairs = loss + l, loss_pairs + p
        return loss, loss_pairs, pairs

    net.hogwild_threads, net.replicas = min(threads, n_batches), replicas  # for the step cap
    # parallelism comes from the Python threads: their ops are too small for intra-op threads, whose barriers
    # stall on shared cores; without Hogwild (a tiny vocabulary: a few larger V x V GEMMs) intra-op threads do
    with torch_threads(intra_op_threads if threads <= 1 else 1):
        if threads <= 1 or n_batches == 1:
            results = [run(0)]
        else:
            with ThreadPoolExecutor(threads) as pool:
                results = list(pool.map(run, range(threads)))
    # the sums are tensors until here (on a GPU each read holds the host until the queue drains)
    loss, loss_pairs, pairs = (float(sum(r[i] for r in results)) for i in range(3))
    return {"loss": loss / max(1.0, loss_pairs), "pairs": pairs}
