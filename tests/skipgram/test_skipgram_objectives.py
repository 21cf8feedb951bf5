"""The three objectives: formulas on hand cases, hand-written updates == autograd, the step cap."""

import math

import pytest
import torch

from zoo.models.skipgram.nets import SkipGram


def sig(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def hand_net(objective: str) -> SkipGram:
    counts = torch.tensor([50, 30, 20])  # q ~ count^0.75
    net = SkipGram(counts, dim=2, objective=objective, negative=2)
    net.centre.data = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
    net.context.data = torch.tensor([[0.2, 0.4], [1.0, -1.0], [0.3, 0.0]])
    return net


def test_nce_loss_on_a_hand_case():
    net = hand_net("nce")
    q = torch.tensor([50.0, 30, 20]) ** 0.75
    q = (q / q.sum()).tolist()
    k = 2
    # one pair: conditioning word 0 predicts word 1; noise words 2 and 0
    cond, valid, out = torch.tensor([[0]]), torch.tensor([[True]]), torch.tensor([[1, 2, 0]])
    s = {1: 1.0, 2: 0.3, 0: 0.2}  # u_w . v_0
    expected = -(math.log(sig(s[1] - math.log(k * q[1])))
                 + math.log(1 - sig(s[2] - math.log(k * q[2])))
                 + math.log(1 - sig(s[0] - math.log(k * q[0]))))
    assert float(net.loss(net.centre, net.context, cond, valid, out)) == pytest.approx(expected, rel=1e-6)
    # negative sampling is the same without the log k q(w) terms
    ns = hand_net("negative_sampling")
    expected_ns = -(math.log(sig(1.0)) + math.log(1 - sig(0.3)) + math.log(1 - sig(0.2)))
    assert float(ns.loss(ns.centre, ns.context, cond, valid, out)) == pytest.approx(expected_ns, rel=1e-6)
    # a noise word equal to the predicted word is skipped (word2vec's `if (target == word) continue`)
    same = torch.tensor([[1, 1, 0]])
    expected_skip = -(math.log(sig(1.0)) + math.log(1 - sig(0.2)))
    assert float(ns.loss(ns.centre, ns.context, cond, valid, same)) == pytest.approx(expected_skip, rel=1e-6)


def test_full_softmax_loss_on_a_hand_case():
    net = hand_net("full_softmax")
    cond, valid, out = torch.tensor([[0]]), torch.tensor([[True]]), torch.tensor([[1]])
    scores = [0.2, 1.0, 0.3]
    expected = -(scores[1] - math.log(sum(math.exp(x) for x in scores)))
    assert float(net.loss(net.centre, net.context, cond, valid, out)) == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("objective", ["nce", "negative_sampling", "full_softmax"])
@pytest.mark.parametrize("share", [True, False])
@pytest.mark.parametrize("dense", [True, False])
def test_hand_written_sgd_equals_autograd(objective, share, dense):
    """One simultaneous step == -lr * the autograd gradient of the summed loss, duplicates included,
    by the sparse (gather/bmm/scatter) and the dense (V x V) paths."""
    torch.manual_seed(0)
    V, D, B, S = 12, 6, 9, 4
    net = SkipGram(torch.randint(1, 100, (V,)), dim=D, objective=objective, negative=3, step_cap=False)
    net.centre.data.normal_()
    net.context.data.normal_(0, 0.5)
    cond = torch.randint(0, V, (B, S))  # small vocabulary: many repeated rows
    valid = torch.rand(B, S) < 0.8
    target = torch.randint(0, V, (B,))
    g = torch.Generator().manual_seed(5)
    before_v, before_u = net.centre.detach().clone(), net.context.detach().clone()
    lr = 0.05
    net.sgd_windows(cond, valid, target, lr, generator=g, share_negatives=share, dense=dense)
    # replay the same noise draw for the reference
    g = torch.Generator().manual_seed(5)
    if objective == "full_softmax":
        ref_cond, ref_valid, out = cond, valid, target[:, None]
    elif share:
        out = torch.cat([target[:, None], net.sampler.sample((B, 3), g)], 1)
        ref_cond, ref_valid = cond, valid
    else:
        tgt = target[:, None].expand_as(cond)[valid]
        out = torch.cat([tgt[:, None], net.sampler.sample((len(tgt), 3), g)], 1)
        ref_cond, ref_valid = cond[valid][:, None], torch.ones(len(tgt), 1, dtype=torch.bool)
    v, u = before_v.clone().requires_grad_(), before_u.clone().requires_grad_()
    net.loss(v, u, ref_cond, ref_valid, out).backward()
    assert torch.allclose(net.centre, before_v - lr * v.grad, atol=1e-5)
    assert torch.allclose(net.context, before_u - lr * u.grad, atol=1e-5)


def _relative_change(a: torch.Tensor, b: torch.Tensor, start: torch.Tensor) -> float:
    """|(a - start) - (b - start)| / |b - start|: how far step a is from step b."""
    return float((a - b).norm() / (b - start).norm())


@pytest.mark.parametrize("method", ["newton", "line"])
def test_step_cap_is_plain_sgd_when_rows_are_lightly_loaded(method):
    """20 windows on 500 words: the line search keeps plain SGD's step exactly (1e-7); the damped
    Newton step shortens it by lr c h |u|^2 per term, here ~1e-3 of the step (threshold 1 %)."""
    torch.manual_seed(1)
    counts = torch.randint(1, 100, (500,))
    nets = [SkipGram(counts, dim=8, step_cap=cap, cap_method=method) for cap in (False, True)]
    nets[0].context.data = torch.randn(500, 8) * 0.1
    nets[1].load_state_dict(nets[0].state_dict())
    start = [t.detach().clone() for t in (nets[0].centre, nets[0].context)]
    cond, target = torch.randint(0, 500, (20, 4)), torch.randint(0, 500, (20,))
    valid = torch.ones(20, 4, dtype=torch.bool)
    for net in nets:
        net.sgd_windows(cond, valid, target, 0.025, torch.Generator().manual_seed(0))
    assert not torch.equal(nets[0].centre, start[0])
    for capped, plain, before in zip((nets[1].centre, nets[1].context), (nets[0].centre, nets[0].context), start):
        if method == "line":
            assert torch.allclose(capped, plain, atol=1e-7)
        else:
            assert _relative_change(capped, plain, before) < 0.01


@pytest.mark.parametrize("objective", ["nce", "negative_sampling"])
def test_dense_and_sparse_steps_agree_with_the_step_cap(objective):
    """The dense path's capped step equals the sparse path's (seed 0, tolerance 1e-5): the cap's
    per-row curvature sums are the same sums, taken over a (V, V) matrix."""
    torch.manual_seed(0)
    V, B, S = 30, 500, 6
    cond, target = torch.randint(0, V, (B, S)), torch.randint(0, V, (B,))
    valid = torch.rand(B, S) < 0.9
    counts = torch.randint(1, 100, (V,))
    nets = [SkipGram(counts, dim=16, objective=objective, step_cap=True) for _ in range(2)]
    nets[0].context.data.normal_(0, 0.5)
    nets[1].load_state_dict(nets[0].state_dict())
    before = nets[0].centre.detach().clone()
    for net, dense in zip(nets, (True, False)):
        net.replicas = 2
        net.sgd_windows(cond, valid, target, 0.025, torch.Generator().manual_seed(3), dense=dense)
    assert (nets[0].centre - before).abs().max() > 1e-3  # the step did something
    assert torch.allclose(nets[0].centre, nets[1].centre, atol=1e-5)
    assert torch.allclose(nets[0].context, nets[1].context, atol=1e-5)


def test_step_cap_keeps_a_huge_coherent_minibatch_stable():
    """4,000 windows over a 10-word vocabulary in one simultaneous step: plain SGD at word2vec's
    lr overshoots and the loss explodes; the capped step lowers it."""
    torch.manual_seed(0)
    B, S = 4000, 6
    cond, target = torch.randint(0, 10, (B, S)), torch.randint(0, 10, (B,))
    valid = torch.ones(B, S, dtype=torch.bool)
    losses = {}
    for cap in (False, True):
        net = SkipGram(torch.full((10,), 100), dim=20, objective="negative_sampling", step_cap=cap)
        net.centre.data = torch.randn(10, 20)
        net.context.data = torch.randn(10, 20)
        g = torch.Generator().manual_seed(0)
        out = torch.cat([target[:, None], net.sampler.sample((B, 5), g)], 1)
        before = float(net.loss(net.centre, net.context, cond, valid, out))
        for _ in range(3):
            net.sgd_windows(cond, valid, target, 0.025, torch.Generator().manual_seed(1))
        losses[cap] = float(net.loss(net.centre, net.context, cond, valid, out)) / before
    assert losses[True] < 0.9, losses
    assert not losses[False] < 1.0, losses


@pytest.mark.parametrize("method", ["newton", "line"])
def test_step_cap_keeps_the_full_step_of_terms_that_pull_apart(method):
    """600 terms on one word vector whose output vectors are orthogonal: together they would meet
    the cap lr / max(1, lr sum h |u|^2) (lr times the summed curvature bound h |u|^2 = 15, so a 15x
    shorter step), but each adds curvature along its own direction only. The line search keeps
    plain SGD's step (1e-6); the damped Newton step divides each direction's by 1 + lr h n, n its
    terms (measured: 7.8 % of the step apart; threshold 15 %). That cap would cut frequent rows' steps and
    leave 65,536-window vectors half gensim's length."""
    torch.manual_seed(0)
    V, B, lr = 400, 100, 0.1
    cond, target = torch.zeros(B, 1, dtype=torch.long), torch.arange(1, B + 1)
    valid = torch.ones(B, 1, dtype=torch.bool)
    nets = [SkipGram(torch.full((V,), 10), dim=V, step_cap=cap, cap_method=method) for cap in (False, True)]
    for net in nets:
        net.centre.data.zero_()  # every score 0: residual 1/2, path curvature 1/4
        net.context.data = torch.eye(V)  # u_w = e_w: orthogonal, |u|^2 = 1
        net.sgd_windows(cond, valid, target, lr, torch.Generator().manual_seed(0))
    assert lr * B * 6 * 0.25 > 10  # the summed bound over the 600 terms
    plain, capped = nets[0].centre.detach(), nets[1].centre.detach()
    assert plain[0].abs().max() > 0.01  # the step did something
    if method == "line":
        assert torch.allclose(capped, plain, atol=1e-6)
    else:
        assert _relative_change(capped, plain, torch.zeros_like(plain)) < 0.15


@pytest.mark.parametrize("objective", ["nce", "negative_sampling", "full_softmax"])
def test_step_cap_holds_back_saturated_wrong_scores(objective, monkeypatch):
    """Every row near one direction d, so every noise score (or, for the softmax, every row's score
    of word 0, which is never a target) is saturated on the wrong side: sig'(s) ~ 0 while the
    gradient is at full size. Capped with sig'(s) itself, 4,000 windows on 10 words blow the loss
    up by orders of magnitude in 3 simultaneous steps; with ``path_curvature`` (1/4 for a wrong-side
    score) it falls (seed 0; thresholds 0.5 and 100x, measured 0.05-0.14 and > 1e13)."""
    from zoo.models.skipgram import nets

    def loss_ratio() -> float:
        torch.manual_seed(0)
        B, S, V = 4000, 6, 10
        cond, target = torch.randint(0, V, (B, S)), torch.randint(1, V, (B,))
        valid = torch.ones(B, S, dtype=torch.bool)
        net = SkipGram(torch.full((V,), 100), dim=20, objective=objective, step_cap=True)
        d = torch.randn(20)
        net.centre.data = d + 0.1 * torch.randn(V, 20)
        net.context.data = 0.1 * torch.randn(V, 20)
        if objective == "full_softmax":
            net.context.data[0] += d  # word 0 wins every softmax, and is never a target
        else:
            net.context.data += d  # every noise score is large and positive
        noise = net.sampler.sample((B, 5), torch.Generator().manual_seed(0))
        out = target[:, None] if objective == "full_softmax" else torch.cat([target[:, None], noise], 1)
        before = float(net.loss(net.centre.detach(), net.context.detach(), cond, valid, out))
        for _ in range(3):
            net.sgd_windows(cond, valid, target, 0.025, torch.Generator().manual_seed(1))
        return float(net.loss(net.centre.detach(), net.context.detach(), cond, valid, out)) / before

    assert loss_ratio() < 0.5
    monkeypatch.setattr(nets, "path_curvature", lambda g: g.abs() * (1 - g.abs()))  # sig'(s) itself
    assert not loss_ratio() < 100


@pytest.mark.parametrize("init_range", [0.5, 1.0])
def test_initial_word_vectors_span_the_chosen_range(init_range):
    """word2vec.c starts v ~ U(-0.5/D, 0.5/D), gensim 4 U(-1/D, 1/D); the context table starts at 0.
    With 4,000 x 50 draws (seed 0) the extremes lie within 0.1 % of the bound."""
    torch.manual_seed(0)
    dim = 50
    net = SkipGram(torch.full((4000,), 10), dim=dim, init_range=init_range)
    bound = init_range / dim
    assert net.centre.abs().max() <= bound
    assert net.centre.max() > 0.999 * bound and net.centre.min() < -0.999 * bound
    assert net.context.abs().max() == 0


@pytest.mark.parametrize("method", ["newton", "line"])
@pytest.mark.parametrize("objective", ["negative_sampling", "nce", "full_softmax"])
def test_rows_without_unique_give_the_same_tables(objective, method):
    """``sync_free_rows`` (no torch.unique, whose size the host reads back each
    call) finds the step cap's rows by a sort, padded with zero steps: the tables after three capped
    steps equal unique's bit for bit (seed 0; CPU)."""
    torch.manual_seed(0)
    counts = torch.randint(1, 100, (300,))
    cond, target = torch.randint(0, 300, (200, 4)), torch.randint(0, 300, (200,))
    valid = torch.rand(200, 4) > 0.2
    tables = []
    for sync_free in (False, True):
        net = SkipGram(counts, dim=16, objective=objective, step_cap=True, cap_method=method)
        with torch.no_grad():
            net.centre.uniform_(-0.5, 0.5, generator=torch.Generator().manual_seed(1))
            net.context.uniform_(-0.5, 0.5, generator=torch.Generator().manual_seed(2))
            net.sync_free_rows = sync_free
            start = net.context.detach().clone()
            g = torch.Generator().manual_seed(3)
            for _ in range(3):
                net.sgd_windows(cond, valid, target, 0.05, g, dense=False)
        tables.append((net.centre.detach().clone(), net.context.detach().clone()))
    assert not torch.equal(tables[1][1], start)  # the capped steps moved the tables
    assert all(torch.equal(a, b) for a, b in zip(*tables))


@pytest.mark.parametrize("iterations", [1, 2, 6])
def test_newton_step_is_textbook_conjugate_gradients_on_every_row(iterations, monkeypatch):
    """``_capped_step`` runs CG on (c H + I / lr) d = g for all rows at once, skipping the last
    iteration's unused residual and direction: its step must be textbook CG's after the same number
    of iterations, row by row (seed 0, 40 rows of D = 6 with their own SPD H, c = 2; float64, 1e-10),
    and D = 6 iterations must solve the system exactly."""
    from zoo.models.skipgram import nets as nets_module

    monkeypatch.setattr(nets_module, "NEWTON_ITERATIONS", iterations)
    torch.manual_seed(0)
    R, D, lr, c = 40, 6, 0.025, 2
    M = torch.randn(R, D, D, dtype=torch.float64)
    H = M @ M.transpose(1, 2) * torch.rand(R, 1, 1, dtype=torch.float64) * 50  # (R, D, D) per-row curvature
    grad = torch.randn(R, D, dtype=torch.float64)
    net = SkipGram(torch.ones(3), dim=D)
    net.replicas = c
    step = net._capped_step(grad, lambda P: torch.bmm(H, P[:, :, None])[..., 0], lr)
    A = c * H + torch.eye(D, dtype=torch.float64) / lr
    for r in range(R):
        x, res = torch.zeros(D, dtype=torch.float64), grad[r].clone()
        p = res.clone()
        for _ in range(iterations):
            Ap = A[r] @ p
            alpha = (res @ res) / (p @ Ap)
            x, new = x + alpha * p, res - alpha * Ap
            p, res = new + (new @ new) / (res @ res) * p, new
        assert torch.allclose(step[r], x, atol=1e-10, rtol=1e-10)
    exact = torch.linalg.solve(A, grad[:, :, None])[..., 0]
    error = float((step - exact).norm() / exact.norm())
    assert error < 1e-8 if iterations == D else error > 1e-6  # a partial solve is not the exact one
