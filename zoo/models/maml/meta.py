"""MAML's inner loop and meta-gradient (Finn et al. 2017, Algorithm 1; the CS 182/282A notes,
"Model-Agnostic Meta-Learning (MAML)").

    theta_0 = theta,   theta_{j+1} = theta_j - alpha (.) grad_theta L(theta_j; D_tr)      (inner, k steps)
    meta-loss = 1/T sum_i L(theta_k^(i); D_ts^(i)),   theta <- Adam(grad_theta meta-loss)  (outer)

Two implementations of the same meta-loss, whose gradients agree to 1e-5 (tests/maml):

- ``batched``: one task is a pure function of (theta, its data), the inner gradient is
  ``torch.func.grad`` of the functional net (``functional_call``) and ``torch.func.vmap`` maps it
  over the meta-batch, so T tasks are one batched computation. Autograd differentiates through the
  whole thing (``.backward()`` on the mean), including through the inner gradients (second order).
  For the ReLU MLP under the squared error (the sinusoid) the batched path is ``mlp_grad``: the same
  meta-gradient written out by hand (backprop and a Hessian-vector product per inner step), one
  autograd node instead of hundreds of small ones: 1.6-1.8x the autograd version on the CPU, 1 thread.
  The conv net's ``batched_forward`` runs a plain convolution per task on the CPU (vmap would make
  them one grouped convolution, which the CPU's kernels run slower) and a grouped one on a GPU.
- ``loop``: a Python loop over tasks with ``torch.autograd.grad(create_graph=True)``: the textbook
  reference; on the CPU the conv net's batched path ties with it (benchmarks/maml_vs_loop.py).

``first_order`` (FOMAML) stops the gradient at the inner gradients: theta_k = theta - alpha sg(g), so
d theta_k / d theta = I and the meta-gradient is the query gradient at theta_k. ``alpha`` is a float
or, for Meta-SGD (Li et al. 2017), a dict of tensors shaped like the parameters (learned with theta).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn
from torch.func import functional_call, grad, vmap

from zoo.errors import UserError
from zoo.models.maml import mlp_grad

Params = dict[str, Tensor]
LossFn = Callable[[Tensor, Tensor], Tensor]  # (prediction, target) -> scalar


def step(params: Params, grads: Params, alpha: float | Params, first_order: bool) -> Params:
    """One inner gradient step theta - alpha (.) g (stop-gradient on g when first-order)."""
    out = {}
    for name, p in params.items():
        g = grads[name].detach() if first_order else grads[name]
        a = alpha[name] if isinstance(alpha, dict) else alpha
        out[name] = p - a * g
    return out


def adapt(net: nn.Module, params: Params, alpha: float | Params, x: Tensor, y: Tensor, loss_fn: LossFn,
          steps: int, first_order: bool = False) -> Params:
    """``steps`` inner gradient steps on one task's support set (x, y) with torch.func.grad;
    a pure function of (params, x, y), so it runs under vmap."""

    def support_loss(p: Params) -> Tensor:
        return loss_fn(functional_call(net, p, (x,)), y)

    for _ in range(steps):
        params = step(params, grad(support_loss)(params), alpha, first_order)
    return params


def task_losses(net: nn.Module, params: Params, x: Tensor, y: Tensor, loss_fn: LossFn,
                net_batched: bool = True) -> Tensor:
    """Loss of every task under its own parameters: ``params`` (T, *shape) per tensor, x (T, S, ...),
    y (T, S, ...) -> (T,). ``vmap`` of the functional net, so the T forward passes are one.

    A net may offer its own ``batched_forward(params, x)`` for per-task parameters (the MLP: one
    ``bmm`` per layer); it is used when ``net_batched`` (same numbers as ``vmap(functional_call)``,
    bit for bit on the sinusoid net, and about twice as fast on the CPU: vmap's per-op dispatch is
    most of the cost of such a small net)."""
    if net_batched and hasattr(net, "batched_forward"):
        return vmap(loss_fn)(net.batched_forward(params, x), y)

    def one(p: Params, xi: Tensor, yi: Tensor) -> Tensor:
        return loss_fn(functional_call(net, p, (xi,)), yi)

    return vmap(one)(params, x, y)


def meta_loss_batched(net: nn.Module, params: Params, alpha: float | Params, batch: tuple[Tensor, ...],
                      loss_fn: LossFn, steps: int, first_order: bool = False, net_batched: bool = True) -> Tensor:
    """Mean query loss after adaptation over a meta-batch ``(xs, ys, xq, yq)``, each (T, ...), as
    one batched computation: theta is expanded to T per-task copies (T, *shape) (a view, no copy),
    the tasks' forward passes are one ``vmap``, and since task i's loss depends only on copy i, one
    ``autograd.grad`` of the summed support losses gives every task's own inner gradient (T, *shape).
    Differentiable with respect to ``params`` (and a learned alpha) through the inner steps.

    Same result as ``meta_loss_vmap_grad`` (the textbook ``vmap(grad(...))``), with one functorch
    level fewer: on the sinusoid net at meta-batch 25 it is about 1.5x faster on the CPU, and about
    2x more with the MLP's own ``batched_forward`` (``net_batched=False``: vmap(functional_call))."""
    xs, ys, xq, yq = batch
    if net_batched and mlp_grad.applies(net, loss_fn, batch):  # the sinusoid: written out by hand
        return mlp_grad.meta_loss(net, params, alpha, batch, steps, first_order)
    T = len(xs)
    p = {k: v.expand(T, *v.shape) for k, v in params.items()}  # (T, *shape) views of theta
    for _ in range(steps):
        support = task_losses(net, p, xs, ys, loss_fn, net_batched).sum()
        g = torch.autograd.grad(support, list(p.values()), create_graph=not first_order)
        p = step(p, dict(zip(p, g)), alpha, first_order)
    return task_losses(net, p, xq, yq, loss_fn, net_batched).mean()


def meta_loss_vmap_grad(net: nn.Module, params: Params, alpha: float | Params, batch: tuple[Tensor, ...],
                        loss_fn: LossFn, steps: int, first_order: bool = False) -> Tensor:
    """The textbook functional form: ``vmap`` over tasks of (``torch.func.grad`` inner steps, then
    the query loss). Same value and gradient as ``meta_loss_batched``."""

    def task_loss(p: Params, xs: Tensor, ys: Tensor, xq: Tensor, yq: Tensor) -> Tensor:
        adapted = adapt(net, p, alpha, xs, ys, loss_fn, steps, first_order)
        return loss_fn(functional_call(net, adapted, (xq,)), yq)

    return vmap(task_loss, in_dims=(None, 0, 0, 0, 0))(params, *batch).mean()  # (T,) -> ()


def meta_loss_loop(net: nn.Module, params: Params, alpha: float | Params, batch: tuple[Tensor, ...],
                   loss_fn: LossFn, steps: int, first_order: bool = False) -> Tensor:
    """The same meta-loss, one task at a time with plain autograd (the reference)."""
    xs, ys, xq, yq = batch
    total = 0.0
    for i in range(len(xs)):
        p = params
        for _ in range(steps):
            loss = loss_fn(functional_call(net, p, (xs[i],)), ys[i])
            g = torch.autograd.grad(loss, list(p.values()), create_graph=not first_order)
            p = step(p, dict(zip(p, g)), alpha, first_order)
        total = total + loss_fn(functional_call(net, p, (xq[i],)), yq[i])
    return total / len(xs)


def resolve_path(path: str, conv: bool, device: torch.device, first_order: bool = False) -> str:
    """``auto``: the loop for the conv net on the CPU (the batched path ties with it there, so the
    reference stays), the batched path everywhere else (benchmarks/results/maml_vs_loop*.json).

    ``vmap_grad`` is refused for second order through batch norm: torch.func's batching rule for
    batch norm's double backward gives wrong meta-gradients (off by ~3 % in float64 against the
    loop, while ``grad`` without ``vmap`` is exact; functorch issue #534). ``batched`` takes its
    inner gradients with plain autograd and is exact (tests/maml/test_maml_meta.py)."""
    if path == "vmap_grad" and conv and not first_order:
        raise UserError("model.path=vmap_grad gives wrong second-order gradients through batch norm "
                        "(torch.func batching rule); use model.path=batched or loop (or auto)")
    if path != "auto":
        return path
    return "loop" if conv and device.type == "cpu" else "batched"


META_LOSSES = {"batched": meta_loss_batched, "vmap_grad": meta_loss_vmap_grad, "loop": meta_loss_loop}


@torch.no_grad()
def adaptation_curve(net: nn.Module, params: Params, alpha: float | Params, batch: tuple[Tensor, ...],
                     loss_fn: LossFn, steps: int, metric: Callable | None = None,
                     chunk: int = 100) -> tuple[Tensor, Tensor | None]:
    """Query loss (and ``metric``, e.g. accuracy) of every task after 0, 1, ..., ``steps`` inner
    steps: two (T, steps + 1) tensors. Batched over tasks in chunks of ``chunk`` (memory)."""
    params = {k: v.detach() for k, v in params.items()}
    alpha = {k: v.detach() for k, v in alpha.items()} if isinstance(alpha, dict) else alpha

    def one_task(xs: Tensor, ys: Tensor, xq: Tensor, yq: Tensor) -> tuple[Tensor, Tensor]:
        p, losses, metrics = params, [], []
        for j in range(steps + 1):
            out = functional_call(net, p, (xq,))
            losses.append(loss_fn(out, yq))
            metrics.append(metric(out, yq) if metric is not None else losses[-1])
            if j < steps:
                p = adapt(net, p, alpha, xs, ys, loss_fn, 1, first_order=True)
        return torch.stack(losses), torch.stack(metrics)

    # torch.func.grad needs autograd on and inference mode off (Lightning evaluates in it; torch < 2.12 returns
    # zeros there, pytorch issue 177318); the batch is cloned, as an inference tensor cannot enter a graph
    with torch.inference_mode(False), torch.enable_grad():
        batch = tuple(t.clone() for t in batch)
        parts = [vmap(one_task)(*(t[i:i + chunk] for t in batch)) for i in range(0, len(batch[0]), chunk)]
    losses = torch.cat([p[0] for p in parts])
    metrics = torch.cat([p[1] for p in parts]) if metric is not None else None
    return losses, metrics
