"""A CPU model of the GPU kernel's Hogwild over warps (zoo/models/skipgram/gpu_kernel.py), to see on a CPU how its
quality falls with the number of jobs at once (an H100 run at 4,096 jobs agreed 0.22 with gensim on Wikipedia,
gensim's own seeds 0.58: benchmarks/results/skipgram_vs_gensim_wiki_sequential_jobs4096_h100.json).

``lockstep_chunk`` runs the kernel's J jobs (the same bounds, seeds, noise words, learning rate and update) in
ticks: in one tick every job takes its next step, one (pair, output word) update, computed from the tables as
they were when the tick began; then the steps' writes land in job order, so when two jobs wrote one row in a
tick only the last write is kept (the other update is lost, as with two warps' read-modify-writes that
overlap). The context row of a pair is read when the pair begins and its summed step added when it ends, as
the kernel does. J = 1 is the sequential kernel itself. A GPU's warps are not in step, so this is a model:
how well it predicts the GPU is checked against the H100's 4,096-job run.

Used by skipgram_hogwild.py's ``warpsJ`` variants (e.g. ``--variants threads1,warps64,warps4096``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from zoo.models.skipgram.kernel import MAX_SCORE, SIGMOID32, _noise_word


@njit(cache=True)
def _next_pair(tokens, sentence, reduced, i, j, hi, n_total):
    """The pair after (centre i, context j) in the kernel's order within the job [.., hi): (i, j), or (hi, 0)."""
    while i < hi:
        last = min(n_total - 1, i + reduced[i])
        j += 1
        if j < max(0, i - reduced[i]):
            j = max(0, i - reduced[i])
        while j <= last and (j == i or sentence[j] != sentence[i]):
            j += 1
        if j <= last:
            return i, j
        i += 1
        j = -1 << 40  # the next centre starts at its window's first word
    return hi, 0


@njit(cache=True)
def _next_block(tokens, sentence, reduced, i, j, ends, b, jobs, block, n_total):
    """With blocks (block > 0): past the end of job b's block, its first pair in its next blocks (ends[b] moves)."""
    while block > 0 and i >= ends[b] and ends[b] < n_total:
        start = ends[b] - block + jobs * block  # the block J blocks on
        if start >= n_total:
            break
        ends[b] = min(start + block, n_total)
        i, j = _next_pair(tokens, sentence, reduced, start, -1 << 40, ends[b], n_total)
    return i, j


@njit(inline="always")
def _land(table, row, value, additive):
    """A job's step on one row: added to it (the GPU kernel's atomic adds) or stored over it."""
    if additive:
        table[row] += value
    else:
        table[row] = value


@njit(fastmath=True, cache=True)
def lockstep_chunk(tokens, sentence, reduced, bounds, syn0, syn1, keep, alias, log_kq, negative, lr0, lr1, seed,
                   skip_saturated, table_scale, block=0, additive=False, immediate=False):
    """kernel._train_chunk's update over the jobs of ``bounds`` (J + 1,) stepped together (the module docstring);
    returns (0, pairs). block = 0: job b is tokens bounds[b]..bounds[b + 1] (gpu_kernel.job_bounds); block = S:
    job b takes the blocks of S tokens b, b + J, b + 2J, ..., so that the jobs sweep the chunk side by side.
    additive: the writes add their steps (atomic adds on a GPU) instead of storing the rows, so none is lost.
    immediate: every step lands as soon as it is made and a new pair reads its context row at once: the jobs'
    interleaved order without stale reads (a GPU cannot run this; it separates the order's cost from the
    staleness's)."""
    n_total = tokens.shape[0]
    dim = syn0.shape[1]
    nce = log_kq.shape[0] > 0
    jobs = bounds.shape[0] - 1
    first = bounds[:-1].copy()  # where each job starts
    ends = bounds[1:].copy()  # the end of each job's current block
    if block > 0:
        for b in range(jobs):
            first[b] = min(b * block, n_total)
            ends[b] = min(first[b] + block, n_total)
    pos_i = np.empty(jobs, dtype=np.int64)  # each job's pair: centre i, context j; i == its end: done
    pos_j = np.empty(jobs, dtype=np.int64)
    step = np.zeros(jobs, dtype=np.int64)  # the output word the job is on: 0 the centre, 1..k noise
    rng = np.empty(jobs, dtype=np.uint64)
    v = np.empty((jobs, dim), dtype=syn0.dtype)  # the pair's context row, read when the pair begins
    work = np.zeros((jobs, dim), dtype=syn0.dtype)  # its summed step
    row_out = np.full(jobs, -1, dtype=np.int64)  # this tick's write to syn1 (row, value); -1 none
    val_out = np.empty((jobs, dim), dtype=syn0.dtype)
    row_ctx = np.full(jobs, -1, dtype=np.int64)  # this tick's write to syn0 (a pair's end)
    val_ctx = np.empty((jobs, dim), dtype=syn0.dtype)
    for b in range(jobs):
        rng[b] = np.uint64(seed + 7919 * (b + 1))
        pos_i[b], pos_j[b] = _next_pair(tokens, sentence, reduced, first[b], -1 << 40, ends[b], n_total)
        pos_i[b], pos_j[b] = _next_block(tokens, sentence, reduced, pos_i[b], pos_j[b], ends, b, jobs, block, n_total)
        if pos_i[b] < ends[b]:
            v[b] = syn0[tokens[pos_j[b]]]
    pairs = 0
    active = True
    while active:
        active = False
        for b in range(jobs):  # every job's step, from the tables as the tick found them
            row_out[b] = -1
            row_ctx[b] = -1
            i = pos_i[b]
            if i >= ends[b]:
                continue
            active = True
            word = tokens[i]
            lr = np.float32(lr0 + (lr1 - lr0) * (i / n_total))
            k = step[b]
            target = word
            label = np.float32(1.0)
            use = True
            if k > 0:
                rng[b], target = _noise_word(rng[b], keep, alias)
                label = np.float32(0.0)
                use = target != word
            if use:
                f = np.float32(0.0)
                for d in range(dim):
                    f += v[b, d] * syn1[target, d]
                if nce:
                    f -= log_kq[target]
                g = np.float32(0.0)
                if f > MAX_SCORE or f < -MAX_SCORE:
                    if not skip_saturated:
                        g = np.float32((label - 1.0) * lr if f > 0 else label * lr)
                else:
                    g = (label - SIGMOID32[int((f + MAX_SCORE) * table_scale)]) * lr
                if g != 0.0:
                    row_out[b] = target
                    for d in range(dim):
                        u = syn1[target, d]
                        work[b, d] += g * u
                        val_out[b, d] = g * v[b, d] if additive else u + g * v[b, d]
                    if immediate:
                        _land(syn1, target, val_out[b], additive)
                        row_out[b] = -1
            if k < negative:
                step[b] = k + 1
                continue
            ctx = tokens[pos_j[b]]  # the pair's end: its context row takes the summed step
            row_ctx[b] = ctx
            for d in range(dim):
                val_ctx[b, d] = work[b, d] if additive else syn0[ctx, d] + work[b, d]
                work[b, d] = 0.0
            pairs += 1
            step[b] = 0
            pos_i[b], pos_j[b] = _next_pair(tokens, sentence, reduced, i, pos_j[b], ends[b], n_total)
            pos_i[b], pos_j[b] = _next_block(tokens, sentence, reduced, pos_i[b], pos_j[b], ends, b, jobs, block,
                                             n_total)
            if immediate:
                _land(syn0, ctx, val_ctx[b], additive)
                row_ctx[b] = -1
                if pos_i[b] < ends[b]:
                    v[b] = syn0[tokens[pos_j[b]]]
        for b in range(jobs):  # the writes land in job order: the last of a row's writes is kept
            if row_out[b] >= 0:
                _land(syn1, row_out[b], val_out[b], additive)
            if row_ctx[b] >= 0:
                _land(syn0, row_ctx[b], val_ctx[b], additive)
        for b in range(jobs):  # a new pair reads its context row after the tick's writes
            if row_ctx[b] >= 0 and pos_i[b] < ends[b]:
                v[b] = syn0[tokens[pos_j[b]]]
    return 0.0, pairs
