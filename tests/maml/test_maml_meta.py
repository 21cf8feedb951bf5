"""The functional meta-gradient: batched (vmap) == per-task loop, second order really differs from
first order, batch norm keeps per-task statistics under vmap, and meta-training helps adaptation."""

import pytest
import torch
import torch.nn.functional as F

from zoo.models.maml import meta, mlp_grad
from zoo.models.maml.nets import MLP, ConvNet

PATHS = ["batched", "batched_vmap", "vmap_grad"]  # batched_vmap: batched without the net's batched_forward


def sinusoid_batch(T=6, K=5, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(T, 2 * K, 1, generator=g, dtype=dtype) * 10 - 5
    amp = torch.rand(T, 1, 1, generator=g, dtype=dtype) * 4.9 + 0.1
    y = amp * torch.sin(x - 1.0)
    return x[:, :K], y[:, :K], x[:, K:], y[:, K:]


def image_batch(T=3, n_way=3, shots=1, query=2, size=12, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    xs = torch.rand(T, n_way * shots, 1, size, size, generator=g, dtype=dtype)
    xq = torch.rand(T, n_way * query, 1, size, size, generator=g, dtype=dtype)
    ys = torch.arange(n_way).repeat(shots).expand(T, -1)
    yq = torch.arange(n_way).repeat(query).expand(T, -1)
    return xs, ys, xq, yq


def meta_grad(net, path, batch, loss_fn, alpha, steps, first_order):
    params = dict(net.named_parameters())
    extra = list(alpha.values()) if isinstance(alpha, dict) else []
    if path == "batched_vmap":
        loss = meta.meta_loss_batched(net, params, alpha, batch, loss_fn, steps, first_order, net_batched=False)
    else:
        loss = meta.META_LOSSES[path](net, params, alpha, batch, loss_fn, steps, first_order)
    return loss, torch.autograd.grad(loss, list(params.values()) + extra)


def nets():
    torch.manual_seed(0)
    yield "mlp", MLP().double(), sinusoid_batch(), F.mse_loss, 0.01
    torch.manual_seed(0)
    yield "conv", ConvNet(n_way=3, filters=8).double(), image_batch(), F.cross_entropy, 0.4


@pytest.mark.parametrize("steps", [1, 2])
@pytest.mark.parametrize("first_order", [False, True])
@pytest.mark.parametrize("path", PATHS)
def test_batched_meta_gradient_equals_the_per_task_loop(path, first_order, steps):
    for name, net, batch, loss_fn, alpha in nets():
        if path == "vmap_grad" and name == "conv" and not first_order:
            continue  # functorch's batch-norm double backward under vmap is wrong: see the next test
        ref_loss, ref = meta_grad(net, "loop", batch, loss_fn, alpha, steps, first_order)
        loss, got = meta_grad(net, path, batch, loss_fn, alpha, steps, first_order)
        assert torch.allclose(loss, ref_loss, atol=1e-10), name
        for g, r in zip(got, ref):
            assert torch.allclose(g, r, atol=1e-5, rtol=1e-5), (name, (g - r).abs().max())


@pytest.mark.parametrize("grouped", [False, True])
def test_the_conv_nets_batched_forward_is_vmap_of_functional_call(grouped):
    """Per-task filters and batch-norm statistics, as vmap(functional_call) computes them, with the CPU's
    convolution per task and the GPU's grouped convolution alike (float64, seed 0)."""
    torch.manual_seed(0)
    net = ConvNet(n_way=3, filters=8).double()
    T = 4
    params = {k: v.detach() + 0.1 * torch.randn(T, *v.shape, dtype=v.dtype) for k, v in net.named_parameters()}
    x = torch.rand(T, 6, 1, 12, 12, dtype=torch.float64)
    ref = torch.func.vmap(lambda p, xi: torch.func.functional_call(net, p, (xi,)))(params, x)
    got = net.batched_forward(params, x, grouped=grouped)
    assert got.shape == (T, 6, 3)
    assert torch.allclose(got, ref, atol=1e-10)


def test_the_grouped_conv_path_gives_the_loops_second_order_meta_gradient(monkeypatch):
    """The GPU's layout (grouped convolutions, one batch norm over T*F channels), run here on the CPU: its
    double backward through batch norm is exact, unlike vmap's (float64, seed 0, 2 inner steps)."""
    forward = ConvNet.batched_forward
    monkeypatch.setattr(ConvNet, "batched_forward", lambda self, p, x: forward(self, p, x, grouped=True))
    torch.manual_seed(0)
    net = ConvNet(n_way=3, filters=8).double()
    _, ref = meta_grad(net, "loop", image_batch(), F.cross_entropy, 0.4, 2, False)
    _, got = meta_grad(net, "batched", image_batch(), F.cross_entropy, 0.4, 2, False)
    for g, r in zip(got, ref):
        assert torch.allclose(g, r, atol=1e-8), (g - r).abs().max()


def test_the_conv_nets_batched_forward_runs_under_bf16_autocast():
    """Batch norm in float32 inside (as BatchNorm32), the logits in the autocast dtype's reach (seed 0)."""
    torch.manual_seed(0)
    net = ConvNet(n_way=3, filters=8)
    params = {k: v.expand(2, *v.shape) for k, v in net.named_parameters()}
    x = torch.rand(2, 6, 1, 12, 12)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = net.batched_forward(params, x, grouped=True)
        loss = F.cross_entropy(got.flatten(0, 1).float(), torch.arange(3).repeat(4))
    grads = torch.autograd.grad(loss, list(params.values()))
    assert all(torch.isfinite(g).all() for g in grads)
    assert torch.allclose(got.float(), torch.stack([net(xi) for xi in x]), atol=0.1)  # each task its own batch


def test_textbook_vmap_grad_is_refused_for_second_order_through_batch_norm():
    """vmap(grad(...)) through batch norm gives second-order meta-gradients off by ~3 % here (torch
    2.14; functorch issue #534: batch norm's backward batching rule), so the model refuses that
    combination and ``batched`` (vmap forward + autograd inner gradients) is used instead."""
    from zoo.errors import UserError

    cpu = torch.device("cpu")
    with pytest.raises(UserError, match="batch norm"):
        meta.resolve_path("vmap_grad", True, cpu, first_order=False)
    assert meta.resolve_path("vmap_grad", True, cpu, first_order=True) == "vmap_grad"
    assert meta.resolve_path("vmap_grad", False, cpu, first_order=False) == "vmap_grad"


def test_vmap_grad_through_batch_norm_is_still_wrong_at_second_order():
    """Why the refusal above exists: on the conv net, vmap(grad(...)) at second order differs from
    the loop by ~1e-2 (float64), and gives the conv biases before batch norm a nonzero meta-gradient
    where the exact one is 0 (batch norm removes them). If this test fails, torch has fixed its
    batching rule: lift the refusal in meta.resolve_path and this test."""
    torch.manual_seed(0)
    net = ConvNet(n_way=3, filters=8).double()
    _, ref = meta_grad(net, "loop", image_batch(), F.cross_entropy, 0.4, 1, False)
    _, got = meta_grad(net, "vmap_grad", image_batch(), F.cross_entropy, 0.4, 1, False)
    assert max(float((g - r).abs().max()) for g, r in zip(got, ref)) > 1e-3


def test_the_mlps_batched_forward_is_vmap_of_functional_call():
    torch.manual_seed(0)
    net = MLP(2, 3, hidden=16)
    params = {k: v + 0.1 * torch.randn(4, *v.shape) for k, v in net.named_parameters()}  # 4 tasks' own weights
    for x in (torch.randn(4, 7, 2), torch.randn(4, 5, 6, 2)):
        ref = torch.func.vmap(lambda p, xi: torch.func.functional_call(net, p, (xi,)))(params, x)
        assert torch.allclose(net.batched_forward(params, x), ref, atol=1e-6)


def test_meta_sgd_learned_step_sizes_get_the_same_gradient_on_every_path():
    torch.manual_seed(0)
    net = MLP().double()
    alpha = {k: torch.full_like(p, 0.01).requires_grad_() for k, p in net.named_parameters()}
    batch = sinusoid_batch()
    _, ref = meta_grad(net, "loop", batch, F.mse_loss, alpha, 2, False)
    for path in PATHS:
        _, got = meta_grad(net, path, batch, F.mse_loss, alpha, 2, False)
        assert all(torch.allclose(g, r, atol=1e-5) for g, r in zip(got, ref))
    assert any(r.abs().max() > 1e-6 for r in ref[-len(alpha):])  # the step sizes do get a gradient


def test_the_sinusoids_batched_path_is_the_hand_written_meta_gradient():
    """The MLP under the squared error takes mlp_grad's path (one autograd node); deeper nets, float32 and
    a 3-step Meta-SGD give the loop's meta-gradient; another loss keeps autograd's inner gradients."""
    torch.manual_seed(0)
    net = MLP(2, 3, hidden=16, layers=3)
    g = torch.Generator().manual_seed(1)
    batch = tuple(torch.randn(4, 6, d, generator=g) for d in (2, 3, 2, 3))  # (T, S, in / out), float32
    alpha = {k: torch.full_like(p, 0.05).requires_grad_() for k, p in net.named_parameters()}
    params = dict(net.named_parameters())
    loss = meta.meta_loss_batched(net, params, alpha, batch, F.mse_loss, 3)
    assert type(loss.grad_fn).__name__ == "MetaLossBackward"
    _, ref = meta_grad(net, "loop", batch, F.mse_loss, alpha, 3, False)
    got = torch.autograd.grad(loss, list(params.values()) + list(alpha.values()))
    for a, b in zip(got, ref):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-4), (a - b).abs().max()
    other = meta.meta_loss_batched(net, params, 0.05, batch, F.l1_loss, 1)
    assert type(other.grad_fn).__name__ != "MetaLossBackward"
    assert not mlp_grad.applies(net, F.mse_loss, (batch[0], batch[1][..., :1], *batch[2:]))  # targets not (T, S, out)


def test_second_order_differs_from_first_order():
    """Differentiating through the inner step adds -alpha H g terms; they must show up (and equal
    the loop's, tested above), else 'second order' would silently be first order."""
    for name, net, batch, loss_fn, alpha in nets():
        _, so = meta_grad(net, "batched", batch, loss_fn, alpha, 1, False)
        _, fo = meta_grad(net, "batched", batch, loss_fn, alpha, 1, True)
        diff = max((a - b).abs().max() for a, b in zip(so, fo))
        scale = max(a.abs().max() for a in so)
        assert diff > 1e-4 * scale, name


def test_first_order_gradient_is_the_query_gradient_at_the_adapted_parameters():
    torch.manual_seed(0)
    net = MLP().double()
    batch = sinusoid_batch(T=1)
    _, fo = meta_grad(net, "batched", batch, F.mse_loss, 0.01, 1, True)
    params = {k: v.detach() for k, v in net.named_parameters()}
    adapted = meta.adapt(net, params, 0.01, batch[0][0], batch[1][0], F.mse_loss, 1)
    adapted = {k: v.detach().requires_grad_() for k, v in adapted.items()}
    q = F.mse_loss(torch.func.functional_call(net, adapted, (batch[2][0],)), batch[3][0])
    expected = torch.autograd.grad(q, list(adapted.values()))
    assert all(torch.allclose(a, b, atol=1e-10) for a, b in zip(fo, expected))


def test_batch_norm_uses_each_tasks_own_statistics_under_vmap():
    """Task 0's meta-loss must not change when the other tasks' images change (no statistics
    shared across the meta-batch), and must equal task 0 computed alone."""
    torch.manual_seed(0)
    net = ConvNet(n_way=3, filters=8).double()
    params = dict(net.named_parameters())
    batch = image_batch(T=3)
    other = tuple(t.clone() for t in batch)
    other[0][1:] = other[0][1:] * 5 + 3  # different support images for tasks 1, 2
    alone = meta.meta_loss_loop(net, params, 0.4, tuple(t[:1] for t in batch), F.cross_entropy, 1)

    def first_task_loss(b):
        p = {k: v.expand(3, *v.shape) for k, v in params.items()}
        g = torch.autograd.grad(meta.task_losses(net, p, b[0], b[1], F.cross_entropy).sum(), list(p.values()))
        p = meta.step(p, dict(zip(p, g)), 0.4, True)
        return meta.task_losses(net, p, b[2], b[3], F.cross_entropy)[0]

    assert torch.allclose(first_task_loss(batch), alone, atol=1e-10)
    assert torch.allclose(first_task_loss(other), alone, atol=1e-10)


def test_adaptation_curve_matches_explicit_fine_tuning():
    torch.manual_seed(0)
    net = MLP().double()
    batch = sinusoid_batch(T=4)
    losses, _ = meta.adaptation_curve(net, dict(net.named_parameters()), 0.01, batch, F.mse_loss, 3)
    assert losses.shape == (4, 4)
    params = {k: v.detach() for k, v in net.named_parameters()}
    for j in range(4):
        p = meta.adapt(net, params, 0.01, batch[0][2], batch[1][2], F.mse_loss, j)
        q = F.mse_loss(torch.func.functional_call(net, p, (batch[2][2],)), batch[3][2])
        assert torch.allclose(losses[2, j], q, atol=1e-10)


def test_auto_path_picks_the_loop_for_the_conv_net_on_cpu_only():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert meta.resolve_path("auto", True, cpu) == "loop"
    assert meta.resolve_path("auto", False, cpu) == "batched"
    assert meta.resolve_path("auto", True, cuda) == "batched"
    assert meta.resolve_path("loop", False, cpu) == "loop"


def test_the_adaptation_curve_leaves_inference_mode():
    """Lightning tests and validates under torch.inference_mode, where torch.func.grad returns zeros
    before torch 2.12 (pytorch issue 177318): on the GPU machine's torch 2.11 no fine-tuning step
    changed the test loss (loss_3 == loss_0). The curve's inner gradients are taken outside it, from
    a batch made inside it, and give the curve computed outside it (seed 0)."""
    torch.manual_seed(0)
    net = MLP().double()
    xs, ys, xq, yq = sinusoid_batch()
    seen = []

    def loss_fn(out, y):
        seen.append(torch.is_inference_mode_enabled())
        return F.mse_loss(out, y)

    plain, _ = meta.adaptation_curve(net, dict(net.named_parameters()), 0.01, (xs, ys, xq, yq), loss_fn, 2)
    with torch.inference_mode():
        batch = tuple(t.clone() for t in (xs, ys, xq, yq))  # inference tensors, as Lightning's batches
        inside, _ = meta.adaptation_curve(net, dict(net.named_parameters()), 0.01, batch, loss_fn, 2)
    assert seen and not any(seen)
    torch.testing.assert_close(inside, plain, rtol=0, atol=0)
    assert (plain[:, 2] != plain[:, 0]).all()  # every step moved every task (zero gradients left it flat)
