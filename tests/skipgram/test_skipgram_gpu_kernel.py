"""The Triton kernel of word2vec's sequential updates on a GPU (zoo/models/skipgram/gpu_kernel.py),
checked without one: Triton's interpreter (TRITON_INTERPRET=1, read when the kernel is defined, so in a
fresh process) runs its programs one after another on the CPU, which is the CPU kernel's order over the
same jobs; and Triton compiles it for a Hopper GPU here (its ptxas ships with it). On CUDA: tests/test_gpu.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from zoo.models.skipgram import gpu_kernel

ROOT = Path(__file__).resolve().parents[2]
# Triton comes with torch's Linux wheels (CI, the GPU machines); where torch came without it (macOS, a CPU-only
# index) the GPU path is refused with a message (test_skipgram_kernel.py) and the kernel cannot be checked
needs_triton = pytest.mark.skipif(not gpu_kernel.available(), reason="triton >= 3.6 is not installed (torch's "
                                  "Linux wheels bring it; with an older one the GPU path is refused, "
                                  "test_skipgram_kernel.py)")

# seed 0: a corpus of 120 tokens over 30 words in sentences of 37, 4 jobs; each setting from the same tables
INTERPRETED = """
import json, numpy as np, torch
from skipgram_chunks import random_chunk
from zoo.models.skipgram import gpu_kernel, kernel
V, D, N = 30, 12, 120
c = random_chunk(V, D, N, sentence_length=37, max_half=2)
counts, keep, alias, tokens, sentence, reduced, centre, context = (c[k] for k in (
    "counts", "keep", "alias", "tokens", "sentence", "reduced", "centre", "context"))
bounds = torch.tensor([0, 30, 61, 90, N])
out = []
def record(cpu_pairs, stats, cpu_tables, gpu_tables, start_tables):
    out.append({"cpu_pairs": int(cpu_pairs), "pairs": int(stats["pairs"]), "loss": float(stats["loss"]),
                "diff": max((c - g).abs().max().item() for c, g in zip(cpu_tables, gpu_tables)),
                "moved": min((c - s).abs().max().item() for c, s in zip(cpu_tables, start_tables))})
# (lr 0.4 where noise words are shared: at 0.5 one score of share 0 lies on a sigmoid-table cell's edge, which
# the two kernels' float32 sums, in other orders, round to neighbouring cells: 6.7e-4 apart, not a wrong draw)
for nce, skip, index, share, lr in [(False, False, "exact", 1, 0.5), (True, True, "word2vec", 1, 0.5),
                                    (False, False, "exact", 0, 0.4), (True, True, "word2vec", 2, 0.4)]:
    log_kq = torch.randn(V) * 0.5 if nce else None
    a, b = centre.clone(), context.clone()
    _, cpu_pairs = kernel._train_chunk(tokens.numpy(), sentence.numpy(), reduced.numpy(), bounds.numpy(), 1,
                                       a.numpy(), b.numpy(), *kernel.compact_noise(keep, alias),
                                       np.empty(0, np.float32) if log_kq is None else log_kq.numpy(), 3, lr, 0.1,
                                       123, skip, kernel.TABLE_SCALE[index], kernel.pairs_per_draw(share, reduced))
    x, y = centre.clone(), context.clone()
    stats = gpu_kernel.train_chunk(x, y, tokens, sentence, reduced, (torch.from_numpy(keep), torch.from_numpy(alias)),
                                   log_kq, 3, lr, 0.1, 123, skip_saturated=skip, sigmoid_index=index, bounds=bounds,
                                   share_noise=share)
    record(cpu_pairs, stats, (a, b), (x, y), (centre, context))
# striped jobs (job j takes the stripes of S tokens j, j + J, ...): the CPU kernel over each job's stripes in turn,
# one random stream a job (numba hands its uint64 state back as a Python int)
def striped_cpu(a, b, jobs, stripe, seed, share=1):
    pairs, work = 0, np.empty(D, np.float32)
    for job in range(jobs):
        rng = np.uint64(seed + 7919 * (job + 1))
        for lo in range(job * stripe, N, jobs * stripe):
            _, p, rng = kernel._train_part(tokens.numpy(), sentence.numpy(), reduced.numpy(), lo, min(lo + stripe, N),
                                           a.numpy(), b.numpy(), *kernel.compact_noise(keep, alias),
                                           np.empty(0, np.float32), 3, 0.5, 0.1, N,
                                           rng, work, True, 0, kernel.TABLE_SCALE["exact"], share)
            pairs, rng = pairs + p, np.uint64(rng)
    return pairs
for jobs, stripe in ((1, 7), (3, 10)):
    a, b = centre.clone(), context.clone()
    cpu_pairs = striped_cpu(a, b, jobs, stripe, 123)
    x, y = centre.clone(), context.clone()
    stats = gpu_kernel.train_chunk(x, y, tokens, sentence, reduced, (torch.from_numpy(keep), torch.from_numpy(alias)),
                                   None, 3, 0.5, 0.1, 123, jobs=jobs, skip_saturated=True, stripe=stripe)
    record(cpu_pairs, stats, (a, b), (x, y), (centre, context))
# the model's own call on a GPU (its device set as Lightning sets it; the tensors stay on the CPU, where the
# interpreter runs): jobs = min(gpu_jobs, V // 4) = 7 in stripes of gpu_stripe, its noise table and seed, one draw
# of noise words a window (share_negatives, the default), against the CPU kernel over those stripes
from zoo.models.skipgram.module import SkipGramModule
model = SkipGramModule({"dim": D, "negative": 3, "saturated": "skip", "gpu_stripe": 9},
                       {"vocab": [f"w{i}" for i in range(V)], "counts": counts.tolist(), "window": 2, "train_words": N})
model._device = torch.device("cuda", 0)
start = model.net.centre.detach().clone(), model.net.context.detach().clone()
a, b = (t.clone() for t in start)
cpu_pairs = striped_cpu(a, b, 7, 9, 99, share=kernel.pairs_per_draw(0, reduced))
with torch.no_grad():
    stats = model.sequential_chunk({"tokens": tokens, "sentence": sentence, "window": reduced}, 0.5, 0.1, 99)
record(cpu_pairs, stats, (a, b), (model.net.centre, model.net.context), start)
print(json.dumps(out))
"""


@needs_triton
@pytest.mark.slow  # costly: `make test-slow` (CI runs it)
def test_interpreted_kernel_gives_the_cpu_kernels_tables_job_by_job():
    """Run in order, the jobs leave the tables the CPU kernel leaves over the same 4 jobs (same seeds,
    noise words and sigmoid table), with negative sampling and word2vec.c's clipped steps, and with NCE,
    gensim's skipped saturated steps and word2vec's table index, with noise words drawn for every pair, once a
    window and every 2 pairs (share_noise 1, 0, 2); so do striped jobs (1 job in stripes of 7,
    3 jobs in stripes of 10) against the CPU kernel over each job's stripes in turn; and so does the model's
    own call on a GPU (SkipGramModule.sequential_chunk: its jobs, stripes, noise table, seed and one draw a
    window): within 1e-5
    (float32 rounding of the dot product, summed in another order) of tables that moved by more than 0.1."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'tests'}"}
    done = subprocess.run([sys.executable, "-c", INTERPRETED], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    for run in json.loads(done.stdout.strip().splitlines()[-1]):
        assert run["pairs"] == run["cpu_pairs"] > 200
        assert run["moved"] > 0.1
        assert run["diff"] < 1e-5, run
        assert 0.1 < run["loss"] < 5.0  # the mean loss per pair of each job's first pairs


@needs_triton
def test_kernel_compiles_for_a_hopper_gpu():
    """Triton compiles the kernel for sm_90 with and without NCE, for float64 tables, and with striped jobs
    (its ptxas runs without a GPU): one warp per job, its dot products summed across the warp's lanes by
    shuffles, with no barrier; steps added to the rows by atomic adds, rows read from L2 (.cg)."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    types = {"tokens": "*i64", "sentence": "*i64", "reduced": "*i64", "bounds": "*i64", "keep": "*fp64",
             "alias": "*i64", "log_kq": "*fp32", "sigmoid": "*fp32",
             "losses": "*fp32", "counted": "*i32", "pairs_out": "*i32", "n_total": "i32", "vocab": "i32",
             "negative": "i32", "lr0": "fp32", "lr1": "fp32", "seed": "i64", "table_scale": "fp32",
             "loss_pairs": "i32", "stripe": "i32", "share": "i32", "DIM": "constexpr", "BLOCK": "constexpr",
             "NEG_BLOCK": "constexpr", "NCE": "constexpr",
             "SKIP_SATURATED": "constexpr", "STRIPED": "constexpr"}
    # fp64: trainer.precision=64-true
    for nce, table, striped in ((False, "fp32", False), (True, "fp32", False), (False, "fp64", False),
                                (False, "fp32", True)):
        source = ASTSource(gpu_kernel._train_jobs, {**types, "syn0": f"*{table}", "syn1": f"*{table}"},
                           constexprs={"DIM": 100, "BLOCK": 128, "NEG_BLOCK": 8, "NCE": nce, "SKIP_SATURATED": True,
                                       "STRIPED": striped})
        compiled = gpu_kernel.triton.compile(source, target=GPUTarget("cuda", 90, 32),
                                             options={"num_warps": 1, "num_stages": 1})
        ptx = compiled.asm["ptx"]
        assert compiled.asm["cubin"] and "shfl.sync" in ptx and "bar.sync" not in ptx
        # steps added atomically (Triton >= 3.9 writes an add whose result is unused as red.global, the
        # reduction form of atom.global), rows read from L2
        assert ("atom.global" in ptx or "red.global" in ptx) and "ld.global.cg" in ptx


def test_job_bounds_cut_a_chunk_into_near_equal_contiguous_jobs():
    bounds = gpu_kernel.job_bounds(1000, 7, torch.device("cpu"))
    assert bounds[0] == 0 and bounds[-1] == 1000 and len(bounds) == 8
    sizes = bounds.diff()
    assert sizes.max() - sizes.min() <= 1
    assert len(gpu_kernel.job_bounds(100, 4096, torch.device("cpu"))) - 1 == 100 // gpu_kernel.MIN_JOB_TOKENS
    assert gpu_kernel.job_bounds(5, 4096, torch.device("cpu")).tolist() == [0, 5]


def test_the_cpu_model_of_the_jobs_is_the_sequential_kernel_with_one_job():
    """benchmarks/common/skipgram_lockstep.py (the GPU's jobs stepped together on a CPU, to see how quality falls with
    their number): with one job it is the CPU kernel (to 1e-6; added steps round as u + (g v), not (u + g v)),
    whether steps are stored or added and the job takes blocks or not; with 3 it trains the same pairs from
    other tables (the jobs' updates interleave), and with steps landing at once (``immediate``) stored and
    added steps agree. Seed 0, 5,000 tokens over 300 words."""
    import numpy as np
    from skipgram_chunks import random_chunk

    from benchmarks.common.skipgram_lockstep import lockstep_chunk
    from zoo.models.skipgram import kernel

    c = random_chunk(300, 16, 5000, sentence_length=37, max_half=3)
    keep, alias, N = c["keep"], c["alias"], len(c["tokens"])
    tokens, sentence, reduced, centre, context = (c[k].numpy() for k in ("tokens", "sentence", "reduced", "centre",
                                                                         "context"))
    # the noise table as the CPU kernel reads it (compact_noise), for the kernel and its lockstep model alike
    rest = (*kernel.compact_noise(keep, alias), np.empty(0, np.float32), 3, 0.025, 0.01, 5, True,
            kernel.TABLE_SCALE["exact"])
    a, b = centre.copy(), context.copy()
    _, pairs = kernel._train_chunk(tokens, sentence, reduced, np.array([0, N]), 1, a, b, *rest, 1)
    tables = {}
    for jobs, block, additive, immediate in ((1, 0, False, False), (1, 0, True, False), (1, 7, False, False),
                                             (1, 0, True, True), (3, 0, False, False), (3, 50, True, False),
                                             (3, 50, True, True), (3, 50, False, True)):
        x, y = centre.copy(), context.copy()
        bounds = gpu_kernel.job_bounds(N, jobs, torch.device("cpu")).numpy()
        assert lockstep_chunk(tokens, sentence, reduced, bounds, x, y, *rest, block, additive, immediate)[1] == pairs
        tables[jobs, block, additive, immediate] = x
        if jobs == 1:  # stored or added steps, in blocks or not, at once or not: one job is the kernel
            np.testing.assert_allclose(x, a, rtol=0, atol=1e-6)
            np.testing.assert_allclose(y, b, rtol=0, atol=1e-6)
        else:
            assert np.isfinite(x).all() and np.abs(x - a).max() > 1e-3
    assert np.abs(a - centre).max() > 0.1
    # steps that land at once read no stale row: storing and adding them agree; the stale model differs
    np.testing.assert_allclose(tables[3, 50, True, True], tables[3, 50, False, True], rtol=0, atol=1e-6)
    assert np.abs(tables[3, 50, True, True] - tables[3, 50, True, False]).max() > 1e-4
