"""The hot loop: one subsampled chunk of the corpus -> many vectorised SGD updates.

A Lightning ``training_step`` gets a chunk (~10^5-10^6 words) and calls ``train_chunk``: the
chunk is cut into minibatches of ``batch_centres`` window centres; inside a minibatch the
centres are bucketed by their reduced half-width b (1..window), so a bucket is a dense
(centres, 2b) block with no padding, and each bucket is one ``SkipGram.sgd_windows`` call. The
learning rate falls linearly across the chunk (word2vec decays it per word). Per-step Lightning
overhead is paid once per chunk, not once per minibatch.

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

from zoo.models.skipgram.nets import SkipGram
from zoo.models.skipgram.sampling import window_contexts


def train_chunk(net: SkipGram, tokens: torch.Tensor, sentence: torch.Tensor, window: torch.Tensor,
                max_window: int, lr_start: float, lr_end: float, batch_centres: int = 4096, seed: int = 0,
                threads: int = 1, share_negatives: bool = True, intra_op_threads: int = 1,
                replicas: int = 1) -> dict[str, float]:
    """SGD over every (context -> centre) pair of a chunk.

    tokens, sentence, window: (N,) subsampled word ids, sentence numbers, reduced half-widths.
    Returns {"loss": mean loss per pair on the first minibatch of each thread, "pairs": pairs
    trained}."""
    n = len(tokens)
    n_batches = max(1, math.ceil(n / batch_centres))

    def run(thread: int) -> tuple[float, int, int]:
        g = torch.Generator(device=tokens.device).manual_seed((seed * 7919 + thread) % (1 << 62))
        loss, loss_pairs, pairs = 0.0, 0, 0
        for k in range(thread, n_batches, threads):
            lr = lr_start + (lr_end - lr_start) * k / n_batches
            start = k * batch_centres
            wb = window[start:start + batch_centres]
            order = torch.argsort(wb, stable=True) + start  # centres grouped by half-width
            sizes = torch.bincount(wb, minlength=max_window + 1).tolist()
            first = k == thread
            offset = 0
            for b in range(1, max_window + 1):
                if not sizes[b]:
                    continue
                centres = order[offset:offset + sizes[b]]
                offset += sizes[b]
                ctx_pos, valid = window_contexts(centres, b, sentence)  # (B, 2b)
                l, p = net.sgd_windows(tokens[ctx_pos], valid, tokens[centres], lr, g, share_negatives,
                                       with_loss=first)
                pairs += p
                if first:
                    loss, loss_pairs = loss + l, loss_pairs + p
        return loss, loss_pairs, pairs

    net.hogwild_threads, net.replicas = min(threads, n_batches), replicas  # for the step cap
    previous = torch.get_num_threads()
    # parallelism comes from the Python threads: their ops are too small for intra-op threads, whose
    # barriers stall badly when the cores are shared. Without Hogwild (a tiny vocabulary, where the
    # dense V x V path does a few larger GEMMs) intra-op threads are the way to use the cores.
    torch.set_num_threads(intra_op_threads if threads <= 1 else 1)
    try:
        if threads <= 1 or n_batches == 1:
            results = [run(0)]
        else:
            with ThreadPoolExecutor(threads) as pool:
                results = list(pool.map(run, range(threads)))
    finally:
        torch.set_num_threads(previous)
    loss = sum(r[0] for r in results)
    loss_pairs = sum(r[1] for r in results)
    return {"loss": loss / max(1, loss_pairs), "pairs": float(sum(r[2] for r in results))}
