"""The sequential CPU kernel (zoo/models/skipgram/kernel.py): word2vec's per-pair updates.

Checked against a plain-Python reference of the same update on a tiny corpus whose noise
distribution has one word (so the draws are known), for negative sampling and NCE; its noise
draws against the noise distribution (chi-square); one thread is deterministic; and the model
picks it by itself on a CPU and trains the planted corpus to the minibatch path's quality.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from zoo.models.skipgram import kernel
from zoo.models.skipgram.sampling import AliasSampler

pytestmark = pytest.mark.skipif(not kernel.available(), reason="numba is a dependency; never skipped in CI")


def reference(centre, context, tokens, sentence, reduced, noise_word, negative, lr0, lr1, log_kq=None,
              skip=False, index="exact", draws=None, share=1):
    """The kernel's update in plain Python (same sigmoid table and clipping, one thread). Also
    returns how many terms saturated on the wrong side (the word below -6, a noise word above 6),
    the only terms where the two rules differ (on the right side both make no step). Noise words:
    noise_word every time, or taken in turn from ``draws`` (an iterator): k for every ``share`` pairs of
    a centre in turn (0: k for all its pairs)."""
    v, u = centre.double().clone(), context.double().clone()
    n, loss, pairs, saturated = len(tokens), 0.0, 0, 0
    for i in range(n):
        lr = lr0 + (lr1 - lr0) * i / n
        noise_words, p = None, 0
        for j in range(max(0, i - reduced[i]), min(n - 1, i + reduced[i]) + 1):
            if j == i or sentence[j] != sentence[i]:
                continue
            c, w = tokens[j], tokens[i]
            work = torch.zeros_like(v[c])
            if draws is None:
                noise_words = [noise_word] * negative
            elif noise_words is None or (share and p % share == 0):
                noise_words = [int(next(draws)) for _ in range(negative)]
            p += 1
            for o, label in [(w, 1.0)] + [(x, 0.0) for x in noise_words]:
                if label == 0.0 and o == w:
                    continue
                f = float(v[c] @ u[o]) - (float(log_kq[o]) if log_kq is not None else 0.0)
                loss += math.log1p(math.exp(-(f if label else -f)))
                if abs(f) > kernel.MAX_SCORE:
                    saturated += (f < 0) == (label == 1.0)
                    if skip:
                        continue
                if f > kernel.MAX_SCORE:
                    g = (label - 1.0) * lr
                elif f < -kernel.MAX_SCORE:
                    g = label * lr
                else:
                    cell = int((f + kernel.MAX_SCORE) * (1000 // 6 // 2 if index == "word2vec" else 1000 / 12))
                    g = (label - kernel.SIGMOID[cell]) * lr
                work += g * u[o]
                u[o] += g * v[c]
            v[c] += work
            pairs += 1
    return v, u, loss / pairs, pairs, saturated


def tiny(seed=0, vocab=6, dim=8, n=40, scale=0.5):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, vocab - 1, (n,), generator=g)  # the last word is the noise word only
    sentence = torch.cat([torch.zeros(n // 2, dtype=torch.long), torch.ones(n - n // 2, dtype=torch.long)])
    reduced = torch.randint(1, 4, (n,), generator=g)
    centre = (torch.rand(vocab, dim, generator=g) - 0.5) * scale
    context = (torch.rand(vocab, dim, generator=g) - 0.5) * scale
    probs = torch.zeros(vocab, dtype=torch.float64)
    probs[-1] = 1.0  # every noise draw is word vocab-1: the reference knows them
    return tokens, sentence, reduced, centre, context, kernel.noise_table(AliasSampler(probs))


@pytest.mark.parametrize("nce, skip, index", [(False, False, "exact"), (True, False, "exact"), (False, True, "exact"),
                                             (True, True, "exact"), (False, False, "word2vec"),
                                             (True, True, "word2vec")])
def test_kernel_equals_the_reference_update(nce, skip, index):
    """Tables of scale 4 in the skip cases, so that some scores pass +-6 on the wrong side and the two
    rules differ. index = how a score is looked up in the sigmoid table (model.sigmoid_index)."""
    tokens, sentence, reduced, centre, context, noise = tiny(scale=4.0 if skip else 0.5)
    log_kq = torch.linspace(-1.0, 0.5, len(centre)) if nce else None
    v_ref, u_ref, loss_ref, pairs_ref, saturated = reference(
        centre, context, tokens.tolist(), sentence.tolist(), reduced.tolist(), len(centre) - 1, 3, 0.5, 0.1,
        log_kq, skip, index)
    if index == "word2vec":  # the lookup matters here
        v_exact = reference(centre, context, tokens.tolist(), sentence.tolist(), reduced.tolist(),
                            len(centre) - 1, 3, 0.5, 0.1, log_kq, skip, "exact")[0]
        assert not torch.allclose(v_exact, v_ref, atol=1e-4)
    if skip:
        assert saturated >= 3
        v_clip = reference(centre, context, tokens.tolist(), sentence.tolist(), reduced.tolist(),
                           len(centre) - 1, 3, 0.5, 0.1, log_kq, False)[0]
        assert not torch.allclose(v_clip, v_ref, atol=1e-3)  # the rule matters here
    stats = kernel.train_chunk(centre, context, tokens, sentence, reduced, noise, log_kq, 3, 0.5, 0.1, seed=7,
                               skip_saturated=skip, sigmoid_index=index)
    assert stats["pairs"] == pairs_ref > 50
    assert torch.allclose(centre.double(), v_ref, atol=1e-5) and torch.allclose(context.double(), u_ref, atol=1e-5)
    assert stats["loss"] == pytest.approx(loss_ref, rel=1e-5)


@pytest.mark.parametrize("share, other", [(1, 0), (0, 1), (2, 1)])
def test_noise_words_shared_by_pairs_as_the_reference_draws_them(share, other):
    """kernel.train_chunk's share_noise: k noise words for every pair (1, word2vec.c), for every 2 pairs of a
    window in turn, or once for the whole window (0). A 6-word noise distribution (the tokens' own words among
    them), so the draws matter: the reference takes them from the kernel's stream (``kernel.draw_noise`` at the
    seed of job 0) in the setting's order and must leave the kernel's tables; another setting's order must not."""
    tokens, sentence, reduced, centre, context, _ = tiny()
    noise = kernel.noise_table(AliasSampler(torch.tensor([0.3, 0.25, 0.2, 0.1, 0.1, 0.05], dtype=torch.float64)))
    stream = kernel.draw_noise(noise, 10_000, seed=7 + 7919)  # train_chunk seeds job j with seed + 7919 (j + 1)
    args = (tokens.tolist(), sentence.tolist(), reduced.tolist(), None, 3, 0.5, 0.1)
    v_ref, u_ref, _, pairs_ref, _ = reference(centre, context, *args, draws=iter(stream), share=share)
    v_other = reference(centre, context, *args, draws=iter(stream), share=other)[0]
    assert not torch.allclose(v_other, v_ref, atol=1e-4)
    stats = kernel.train_chunk(centre, context, tokens, sentence, reduced, noise, None, 3, 0.5, 0.1, seed=7,
                               share_noise=share)
    assert stats["pairs"] == pairs_ref > 50
    assert torch.allclose(centre.double(), v_ref, atol=1e-5) and torch.allclose(context.double(), u_ref, atol=1e-5)


def test_word2vec_sigmoid_index_reads_word2vec_c_cells():
    """word2vec.c and gensim index their table with (f + 6) * (1000 / 6 / 2) in C integer arithmetic
    (= 83): a score of 0 reads cell 498, sigmoid(-0.024) < 0.5, and 5.99 reads cell 995; the exact
    lookup reads cells 500 (sigmoid 0.5) and 999."""
    for f, w2v_cell, exact_cell in [(0.0, 498, 500), (5.99, 995, 999), (-5.99, 0, 0)]:
        assert int((f + kernel.MAX_SCORE) * kernel.TABLE_SCALE["word2vec"]) == w2v_cell
        assert int((f + kernel.MAX_SCORE) * kernel.TABLE_SCALE["exact"]) == exact_cell
    assert kernel.SIGMOID[500] == pytest.approx(0.5) and kernel.SIGMOID[498] == pytest.approx(0.494, abs=1e-3)


def test_noise_draws_follow_the_noise_distribution():
    """Seed 3, 200,000 draws from a 7-word distribution: chi-square p > 0.001."""
    from scipy.stats import chisquare

    probs = torch.tensor([0.3, 0.2, 0.15, 0.15, 0.1, 0.07, 0.03], dtype=torch.float64)
    draws = kernel.draw_noise(kernel.noise_table(AliasSampler(probs)), 200_000, seed=3)
    observed = np.bincount(draws, minlength=len(probs))
    assert chisquare(observed, probs.numpy() * len(draws)).pvalue > 1e-3


def test_compact_noise_table_draws_what_the_probability_table_draws():
    """The kernel reads each column's keep probability p as the 24-bit threshold ceil(p 2^24) and compares the
    24-bit coin as an integer: coin / 2^24 < p exactly when coin < threshold, at every coin next to each
    threshold (random p, seed 0, and p at and beside a multiple of 2^-24, 0 and 1); and the generator's draws
    equal a Python rendering of word2vec.c's generator with the float comparison (seed 5, 5,000 draws)."""
    rng = np.random.default_rng(0)
    grid = 3 / 16777216
    keep = np.concatenate([rng.random(2000), [0.0, 1.0, 0.5, grid, np.nextafter(grid, 1), np.nextafter(grid, 0)]])
    threshold, alias = kernel.compact_noise(keep, np.arange(len(keep)))
    assert threshold.dtype == np.uint32 and alias.dtype == np.int32
    for step in (-1, 0, 1, 2):
        coin = np.clip(np.floor(keep * 16777216) + step, 0, 16777215)
        assert np.array_equal(coin / 16777216 < keep, coin < threshold)
    probs = torch.tensor([0.3, 0.2, 0.15, 0.15, 0.1, 0.07, 0.03], dtype=torch.float64)
    table = kernel.noise_table(AliasSampler(probs))
    state, expected = 5, []
    for _ in range(5000):
        state = (state * 25214903917 + 11) % 2**64
        r = state >> 16
        column = r % len(probs)
        expected.append(column if (r >> 24) / 16777216 < table[0][column] else table[1][column])
    assert kernel.draw_noise(table, 5000, seed=5).tolist() == expected


def test_one_thread_is_deterministic_and_threads_train_every_pair():
    tokens, sentence, reduced, centre, context, noise = tiny(n=4000, vocab=50)
    tables = []
    for threads, job_tokens in ((1, 0), (1, 500), (2, 0), (2, 500)):
        v, u = centre.clone(), context.clone()
        stats = kernel.train_chunk(v, u, tokens, sentence, reduced, noise, None, 5, 0.05, 0.01, 11, threads,
                                   job_tokens=job_tokens)
        tables.append((v, u, stats["pairs"]))
    # one thread ignores job_tokens: one stream of updates, bit for bit
    assert torch.equal(tables[0][0], tables[1][0]) and torch.equal(tables[0][1], tables[1][1])
    for v, _, _ in tables[2:]:
        assert torch.isfinite(v).all() and not torch.equal(v, centre)
    # contexts may lie across a thread's or a job's bounds: every pair is trained exactly once
    assert tables[0][2] == tables[2][2] == tables[3][2] > 10_000


@pytest.mark.parametrize("share", [None, False])
def test_the_model_picks_the_kernel_on_a_cpu_and_learns_the_planted_corpus(tmp_path, monkeypatch, share):
    """With the default noise draws (one a window, model.share_negatives true: the kernel's share_noise 0) and
    word2vec.c's (a draw per pair, false: 1), which reach the kernel."""
    from zoo.train import train

    shared, real = [], kernel.train_chunk
    monkeypatch.setattr(kernel, "train_chunk", lambda *a, **kw: shared.append(kw["share_noise"]) or real(*a, **kw))
    result = train(["recipe=skipgram_synthetic", f"run_dir={tmp_path}", "trainer.enable_progress_bar=false",
                    f"data.root={tmp_path}/data", "trainer.max_epochs=2",
                    *([f"model.share_negatives={str(share).lower()}"] if share is not None else [])])
    assert result.model.sequential()
    assert shared and set(shared) == {0 if share is None else 1}
    assert result.test_metrics["test/planted_spearman"] > 0.85  # untrained: ~0; minibatch path: 0.94 in 3 epochs


def test_sequential_updates_refuse_full_softmax():
    from zoo.errors import UserError
    from zoo.models.skipgram.module import SkipGramModule

    with pytest.raises(UserError, match="full_softmax"):
        SkipGramModule({"objective": "full_softmax", "updates": "sequential"},
                       {"vocab": ["a", "b"], "counts": [3, 2], "window": 2, "train_words": 5})


def test_sequential_updates_run_on_a_cpu_or_a_cuda_gpu_with_triton(monkeypatch):
    """updates=sequential: the CPU kernel on a CPU, the Triton kernel on a CUDA GPU (gpu_kernel.py); on another
    device, or on CUDA without triton, one message that names the way out (model.updates=minibatch)."""
    from zoo.errors import UserError
    from zoo.models.skipgram import gpu_kernel
    from zoo.models.skipgram.module import SkipGramModule

    info = {"vocab": ["a", "b"], "counts": [3, 2], "window": 2, "train_words": 5}
    model = SkipGramModule({"updates": "sequential"}, info)
    assert model.sequential()  # on the CPU
    model._device = torch.device("cuda", 0)  # what Lightning sets when it moves the module; nothing runs there
    monkeypatch.setattr(gpu_kernel, "available", lambda: True)  # whatever triton this machine has
    assert model.sequential()
    monkeypatch.setattr(gpu_kernel, "available", lambda: False)
    monkeypatch.setattr(gpu_kernel, "triton_version", lambda: (3, 0))  # torch 2.4's, which fails on the kernel
    with pytest.raises(UserError, match=r"needs triton >= 3.6 \(found 3.0;.*model.updates=minibatch"):
        model.sequential()
    monkeypatch.setattr(gpu_kernel, "triton_version", lambda: None)
    with pytest.raises(UserError, match=r"needs triton >= 3.6 \(none is installed"):
        model.sequential()
    model._device = torch.device("mps")
    with pytest.raises(UserError, match="CPU or a CUDA GPU.*model.updates=minibatch"):
        model.sequential()
    model.cfg.updates = "auto"
    model._device = torch.device("cuda", 0)
    assert not model.sequential()  # auto on a GPU: minibatch updates (the Triton kernel's quality there unmeasured)


def test_the_small_vocabulary_threads_note_is_for_the_minibatch_path_only():
    """With a vocabulary under batch_centres / 4 the minibatch path trades Hogwild threads for intra-op ones
    and says so; the sequential kernel (the CPU default) keeps its threads, and does not say it."""
    from zoo.models.skipgram.module import SkipGramModule

    info = {"vocab": [f"w{i}" for i in range(10)], "counts": list(range(20, 10, -1)), "window": 2,
            "train_words": 155}
    assert SkipGramModule({"threads": 2}, info).threads_note() is None  # updates=auto: the kernel on the CPU
    note = SkipGramModule({"threads": 2, "updates": "minibatch"}, info).threads_note()
    assert note and "10 words < batch_centres / 4: 2 intra-op threads" in note
    assert SkipGramModule({"threads": 1, "updates": "minibatch"}, info).threads_note() is None
