"""word2vec's sequential SGD as a compiled CPU kernel (numba): one update per (context, word) pair.

The minibatch path (``loop.py`` + ``nets.py``) applies the gradients of thousands of windows at
once; that is what a GPU wants, but on a CPU it costs quality (a frequent word's row receives
hundreds of stale gradients per minibatch) and speed (gathers and scatters of (B, S, D) blocks).
word2vec.c and gensim instead update the two tables after every pair: for the word w at position i
and each word c of its reduced window, with k noise words w' ~ q drawn per pair,

    g_o = lr * (y_o - sigmoid(v_c . u_o))     o in {w, w'_1..w'_k}, y = 1 for w, 0 for noise
    u_o += g_o v_c;   v_c += sum_o g_o u_o     (v_c's step uses the u_o before their update)

with v = ``centre`` (syn0, the exported vectors) and u = ``context`` (syn1neg). ``nce`` subtracts
log(k q(o)) from every score. The k noise words are drawn for every pair (``share_noise=1``:
word2vec.c and gensim) or once for every ``share_noise`` pairs of a window (0: once per window, as
"Parallelizing Word2Vec in Shared and Distributed Memory" shares them), still updated pair after pair:
fewer draws and noise rows to load (studies/2026-12-02-skipgram-shared-noise.md). Threads take turns on
jobs of ~10^4 tokens of the chunk and update the shared tables without locks (Hogwild, as word2vec.c and
gensim do); one thread is deterministic.

No maintained library offers this loop on torch tensors (gensim has it in Cython, inside its own
model and vocabulary), so it is written here; numba compiles it on first use and caches the
machine code next to this file (``cache=True``; a read-only install compiles once per process).
Noise words come from the alias table of ``sampling.AliasSampler`` (O(1), read as 8 bytes a word,
``compact_noise``, which at V 34k stays in a 512 KB L2 cache; a binary search over cumulative
weights, as gensim does, was 2x slower here, and word2vec.c's 10^7-cell unigram table 3x slower from
cache misses), random numbers from word2vec.c's linear congruential generator (one stream per
thread), sigmoid from word2vec.c's table of 1,000 steps over [-6, 6] (~10% faster than ``exp``).
Scores, steps and the sigmoid are float32 like the tables (gensim's BLAS calls are float32 too):
mixing in float64 halves the SIMD width and cost 1.44x in CPU time per word (dim 100, V 30,000, one
thread). The noise or positive word's row is read and updated in one pass (its old value feeds the context's step):
two passes took 1.17x the time per chunk (Lee, 300k tokens, one thread, quiet AMD EPYC; 1.06x with
2 threads on 780k tokens, 1.4x on a loaded machine), with the same tables to the bit. A pair's
noise words are drawn before its updates and all its 1 + k scores computed before any row moves (a
noise word drawn twice is scored again after its first update), so the tables are those of
updating in turn, to the bit, while the rows load side by side: the whole 10M-word command took
69.9 s, 64.7 s with the draws first and 53.1 s with the scores first (2 threads, Intel Xeon). The
noise words are drawn one centre ahead (the same stream, in the same order) and their rows, with the
next centre word's, prefetched (LLVM's prefetch hint, ``_prefetch_row``), so that the next centre's
rows come from memory while this one trains: the same tables to the bit, 1.22-1.27x less CPU time a
chunk (10M-word corpus, V 34k, one thread, AMD EPYC; ``studies/skipgram_prefetch.py``); the row of syn0
that comes into a window's reach is prefetched with them (1.03x more).
"""

from __future__ import annotations

import math

import numpy as np
import torch

try:  # optional at import time so that the minibatch (GPU) path never needs it
    import numba
    from llvmlite import binding as llvm_binding
    from llvmlite import ir
    from numba import njit, prange, types
    from numba.core import cgutils
    from numba.extending import intrinsic
except ImportError:  # pragma: no cover - numba is a dependency; this keeps a broken install usable
    numba = None

MAX_SCORE = 6.0  # word2vec.c's MAX_EXP: beyond it sigmoid is taken as 0 or 1 for the step
SIGMOID = 1.0 / (1.0 + np.exp(-(np.arange(1001) / 500.0 - 1.0) * MAX_SCORE))  # (1001,) sigmoid on a grid
SIGMOID32 = SIGMOID.astype(np.float32)  # the kernel computes in float32, like the tables (and gensim's BLAS)
# Cells per unit score in SIGMOID. word2vec.c and gensim compute it in C integers, 1000 / 6 / 2 = 83 (not
# 83.33), so they read sigmoid(~0.996 f - 0.024), rounded down to the grid: slightly larger positive and smaller
# noise steps. "word2vec" reproduces it, "exact" reads sigmoid(f) on the grid.
TABLE_SCALE = {"word2vec": float(1000 // 6 // 2), "exact": 500.0 / MAX_SCORE}
LOSS_PAIRS = 20_000  # pairs per thread and chunk whose loss is summed (the reported train/loss)


def available() -> bool:
    return numba is not None


if numba is not None:
    # LLVM's prefetch intrinsic, named by its pointer type: opaque pointers ("p0") from LLVM 15 on
    PREFETCH = "llvm.prefetch.p0" if llvm_binding.llvm_version_info[0] >= 15 else "llvm.prefetch.p0i8"

    @intrinsic
    def _prefetch_row(typingctx, table, row):
        """Ask the CPU to load table[row, :] (a C-contiguous 2-D array) into its caches, one prefetch per
        64-byte line, without waiting for it: a hint that changes no value."""

        def codegen(context, builder, signature, args):
            table_type, row_type = signature.args
            array = context.make_array(table_type)(context, builder, args[0])
            row_index = context.cast(builder, args[1], row_type, types.intp)
            start = cgutils.get_item_pointer(context, builder, table_type, array,
                                             [row_index, context.get_constant(types.intp, 0)])
            byte = ir.IntType(8).as_pointer()
            i32 = ir.IntType(32)
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [byte, i32, i32, i32]),
                                                PREFETCH)
            base = builder.bitcast(start, byte)
            size = builder.mul(builder.extract_value(array.shape, 1),
                               context.get_constant(types.intp, table_type.dtype.bitwidth // 8))
            line = context.get_constant(types.intp, 64)
            with cgutils.for_range_slice(builder, context.get_constant(types.intp, 0), size, line) as (offset, _):
                # read (0), keep in all cache levels (3), data (1)
                builder.call(fn, [builder.gep(base, [offset]), ir.Constant(i32, 0), ir.Constant(i32, 3),
                                  ir.Constant(i32, 1)])
            return context.get_dummy_value()

        return types.void(table, row), codegen

    @njit(inline="always")
    def _noise_word(rng, keep, alias):
        """(next state, a noise word): one step of word2vec.c's generator, then the alias table as
        ``compact_noise`` gives it (keep: a column's 24-bit threshold, alias: int32)."""
        rng = rng * np.uint64(25214903917) + np.uint64(11)
        r = rng >> np.uint64(16)  # 48 random bits: a column from all of them, a coin from the top 24
        column = np.int64(r % np.uint64(keep.shape[0]))
        coin = r >> np.uint64(24)  # coin / 2^24 < keep probability  <=>  coin < ceil(keep probability 2^24)
        return rng, (column if coin < np.uint64(keep[column]) else np.int64(alias[column]))

    @njit(inline="always", fastmath=True)
    def _score(syn0, ctx, syn1, target):
        """syn0[ctx] . syn1[target] in float32."""
        f = np.float32(0.0)
        for d in range(syn0.shape[1]):
            f += syn0[ctx, d] * syn1[target, d]
        return f

    @njit(cache=True)
    def _draw_noise(keep, alias, n, seed):
        rng = np.uint64(seed)
        out = np.empty(n, dtype=np.int64)
        for i in range(n):
            rng, out[i] = _noise_word(rng, keep, alias)
        return out

    @njit(inline="always")
    def _draw_centre(i, tokens, sentence, reduced, n_total, keep, alias, rng, noise, syn0, syn1, reach, share):
        """The noise words of centre i's pairs into noise (draws, k), as the update loop would draw them: one
        draw of k for every ``share`` pairs (pair p uses draw p // share); their rows and the centre word's row
        of syn1 are prefetched, and the row of syn0 that first comes into reach (``reach``: the widest
        half-width) as a context, i + reach. Returns the stream."""
        _prefetch_row(syn0, tokens[min(n_total - 1, i + reach)])
        first, last = max(0, i - reduced[i]), min(n_total - 1, i + reduced[i])
        p = 0
        for j in range(first, last + 1):
            if j == i or sentence[j] != sentence[i]:
                continue
            if p % share == 0:
                for k in range(noise.shape[1]):
                    rng, noise[p // share, k] = _noise_word(rng, keep, alias)
                    _prefetch_row(syn1, noise[p // share, k])
            p += 1
        _prefetch_row(syn1, tokens[i])
        return rng

    @njit(fastmath=True, nogil=True, cache=True)
    def _train_part(tokens, sentence, reduced, lo, hi, syn0, syn1, keep, alias, log_kq, negative, lr0, lr1,
                    n_total, seed, work, skip_saturated, loss_pairs, table_scale, share):
        dim = syn0.shape[1]
        nce = log_kq.shape[0] > 0
        rng = np.uint64(seed)
        loss = 0.0
        pairs = 0
        targets = np.empty(negative + 1, dtype=np.int64)  # the pair's word and noise words
        scores = np.empty(negative + 1, dtype=np.float32)
        # noise words of this centre's pairs and of the next centre's (drawn one centre ahead, so that their
        # rows load while this centre trains): (2, pairs of a window, k)
        reach = reduced[lo:hi].max() if hi > lo else 0
        noise = np.empty((2, 2 * reach + 1, negative), dtype=np.int64)
        if hi > lo:
            rng = _draw_centre(lo, tokens, sentence, reduced, n_total, keep, alias, rng, noise[lo % 2], syn0, syn1,
                               reach, share)
        for i in range(lo, hi):
            if i + 1 < hi:  # the same stream as drawing each in its turn: the next centre's come after these
                rng = _draw_centre(i + 1, tokens, sentence, reduced, n_total, keep, alias, rng, noise[(i + 1) % 2],
                                   syn0, syn1, reach, share)
            drawn = noise[i % 2]
            word = tokens[i]
            half = reduced[i]
            lr = np.float32(lr0 + (lr1 - lr0) * (i / n_total))
            first = max(0, i - half)  # contexts may lie in a neighbouring job: every pair once, whatever the jobs
            last = min(n_total - 1, i + half)
            p = 0
            for j in range(first, last + 1):
                if j == i or sentence[j] != sentence[i]:
                    continue
                ctx = tokens[j]
                targets[0] = word
                for k in range(1, negative + 1):
                    targets[k] = drawn[p // share, k - 1]
                p += 1
                for k in range(negative + 1):  # every score before any update, so that the rows load side
                    scores[k] = _score(syn0, ctx, syn1, targets[k])  # by side (below)
                for d in range(dim):
                    work[d] = 0.0
                for k in range(negative + 1):
                    target = targets[k]
                    if k == 0:
                        label = np.float32(1.0)
                    else:
                        if target == word:
                            continue
                        label = np.float32(0.0)
                    f = scores[k]  # syn0[ctx] moves only at the pair's end, and the other rows are other rows,
                    for q in range(1, k):  # but for a noise word drawn twice: its row moved since
                        if targets[q] == target:
                            f = _score(syn0, ctx, syn1, target)
                            break
                    if nce:
                        f -= log_kq[target]
                    if pairs < loss_pairs:  # the loss of the first pairs only: logs cost as much as the update
                        z = f if label > 0.5 else -f  # -log sigmoid(z) is this term's loss
                        loss += math.log1p(math.exp(-z)) if z > -30.0 else -z
                    if f > MAX_SCORE or f < -MAX_SCORE:
                        if skip_saturated:  # gensim: no update from a saturated score
                            continue
                        g = np.float32((label - 1.0) * lr if f > 0 else label * lr)  # word2vec.c: sigmoid 1 or 0
                    else:  # word2vec.c's table of sigmoid over [-6, 6] in 1000 steps
                        g = (label - SIGMOID32[int((f + MAX_SCORE) * table_scale)]) * lr
                    for d in range(dim):  # one pass over the row: work gets the row before its update
                        row = syn1[target, d]
                        work[d] += g * row
                        syn1[target, d] = row + g * syn0[ctx, d]
                for d in range(dim):
                    syn0[ctx, d] += work[d]
                pairs += 1
        return loss, pairs, rng  # rng: to go on with the same stream (studies/skipgram_hogwild.py)

    @njit(parallel=True, cache=True)
    def _train_chunk(tokens, sentence, reduced, bounds, threads, syn0, syn1, keep, alias, log_kq, negative, lr0,
                     lr1, seed, skip_saturated, table_scale, share):
        jobs = bounds.shape[0] - 1
        losses = np.zeros(threads)
        counted = np.zeros(threads, dtype=np.int64)
        pairs = np.zeros(threads, dtype=np.int64)
        for t in prange(threads):
            work = np.empty(syn0.shape[1], dtype=syn0.dtype)
            for j in range(t, jobs, threads):  # thread t takes jobs t, t + T, ...: all near one lr
                loss, p, _ = _train_part(tokens, sentence, reduced, bounds[j], bounds[j + 1], syn0, syn1, keep,
                                      alias, log_kq, negative, lr0, lr1, tokens.shape[0],
                                      seed + 7919 * (j + 1), work, skip_saturated,
                                      LOSS_PAIRS if j == t else 0, table_scale, share)
                if j == t:  # the reported loss: each thread's first job only (logs cost as much as updates)
                    losses[t], counted[t] = loss, min(p, LOSS_PAIRS)
                pairs[t] += p
        return losses.sum() / max(1, counted.sum()), pairs.sum()


def noise_table(sampler) -> tuple[np.ndarray, np.ndarray]:
    """The (keep probability, alias) columns of an ``AliasSampler`` as the kernel reads them."""
    return sampler.prob.numpy().astype(np.float64), sampler.alias.numpy().astype(np.int64)


def compact_noise(keep: np.ndarray, alias: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``noise_table``'s columns as the CPU kernel reads them: each column's keep probability as the 24-bit
    threshold ceil(p 2^24) (uint32; the coin, 24 bits, is below p 2^24 exactly when below that) and the alias
    as int32: the same draws from 8 bytes a word instead of 16, so that at V 34k the table (274 KB) stays in a
    512 KB L2 cache."""
    return np.ceil(keep * 16777216.0).astype(np.uint32), alias.astype(np.int32)


def draw_noise(noise: tuple[np.ndarray, np.ndarray], n: int, seed: int = 1) -> np.ndarray:
    """n noise words as the kernel draws them (for tests)."""
    return _draw_noise(*compact_noise(*noise), n, seed)


def pairs_per_draw(share_noise: int, reduced) -> int:
    """The pairs of a window that one draw of k noise words serves, as ``_train_part`` takes it: ``share_noise``
    (1: every pair draws), or for 0 the widest window's pairs, 2 max(reduced) + 1 (one draw a window)."""
    return int(share_noise) if share_noise > 0 else 2 * int(reduced.max()) + 1


def train_chunk(centre: torch.Tensor, context: torch.Tensor, tokens: torch.Tensor, sentence: torch.Tensor,
                reduced: torch.Tensor, noise: tuple[np.ndarray, np.ndarray], log_kq: torch.Tensor | None, negative: int,
                lr_start: float, lr_end: float, seed: int, threads: int = 1,
                skip_saturated: bool = False, job_tokens: int = 0, sigmoid_index: str = "exact",
                share_noise: int = 1) -> dict[str, float]:
    """Sequential SGD over every (context -> word) pair of a chunk, in place on the CPU tables.

    centre, context: (V, D) float32 CPU tables; tokens, sentence, reduced: (N,) subsampled ids,
    sentence numbers and reduced half-widths (``corpus.CorpusChunks``); log_kq: (V,) for NCE or
    None; lr falls linearly from lr_start to lr_end across the chunk; a score beyond +-6 takes the
    sigmoid as 1 or 0 (word2vec.c) or, with ``skip_saturated``, makes no update (gensim); a score
    inside is looked up in the sigmoid table as ``sigmoid_index`` says (``TABLE_SCALE``). The chunk
    is cut into jobs of ``job_tokens`` tokens that the threads take in turn (gensim's workers take
    jobs of 10,000 words from a queue); 0 (and one thread) = one contiguous part per thread.
    ``share_noise``: how many of a window's pairs, in turn, use one draw of k noise words (1: every pair draws
    its own, word2vec.c; 0: one draw for the whole window).
    Returns {"loss": mean loss per pair over the first pairs of every thread's first job,
    "pairs": pairs trained}."""
    if numba is None:
        raise RuntimeError("numba is not installed: pip install numba, or use model.updates=minibatch")
    n = len(tokens)
    if n == 0:
        return {"loss": 0.0, "pairs": 0.0}
    threads = max(1, min(threads, n // 1000 or 1))
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    jobs = threads if job_tokens <= 0 or threads == 1 else max(threads, round(n / job_tokens))
    bounds = np.linspace(0, n, jobs + 1).round().astype(np.int64)
    nce = np.empty(0, np.float32) if log_kq is None else log_kq.detach().cpu().float().numpy()
    as_np = [x.detach().cpu().numpy() for x in (tokens, sentence, reduced)]
    loss, pairs = _train_chunk(*as_np, bounds, threads, centre.detach().numpy(), context.detach().numpy(),
                               *compact_noise(*noise), nce,
                               int(negative), float(lr_start), float(lr_end), int(seed) % (1 << 62),
                               bool(skip_saturated), TABLE_SCALE[sigmoid_index],
                               pairs_per_draw(share_noise, reduced))
    return {"loss": float(loss), "pairs": float(pairs)}
