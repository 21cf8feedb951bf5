"""MAML's meta-gradient for the ReLU MLP under the mean squared error, written out by hand.

The sinusoid's meta-iteration is ~10 MFLOP (the 40 x 40 layer's products), which this CPU multiplies
in a fraction of a millisecond: autograd's graph of the inner gradient and of its derivative (hundreds of
small ops, each with its dispatch and bookkeeping) is most of its time. Here the same meta-gradient is
~90 plain tensor ops, none recorded:

    theta_{j+1} = theta_j - alpha (.) g_j,   g_j = grad L_S(theta_j)                    (inner, per task)
    v = grad L_Q(theta_k) / T                                                            (query gradient)
    for j = k-1 .. 0:  d alpha -= g_j (.) v;   v <- v - H_j (alpha (.) v)               (back through a step)
    d theta = sum over tasks of v

with H_j the Hessian of the task's support loss at theta_j, times a vector by Pearlmutter's R-operator
("Fast Exact Multiplication by the Hessian", 1994): the forward pass and backprop differentiated in the
direction u. ReLU's mask is constant (its second derivative is 0), as autograd has it. First order
drops the H_j term. ``MetaGradient`` returns the meta-loss and hands the gradient to autograd, so
callers differentiate it as they do the other paths (tests/maml: equal to the per-task loop).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

Params = dict[str, Tensor]


def layer_names(net: nn.Module) -> list[tuple[str, str]]:
    """(weight, bias) names of the MLP's linear layers, input to output."""
    return [(f"body.{i}.weight", f"body.{i}.bias") for i, layer in enumerate(net.body) if isinstance(layer, nn.Linear)]


def linear(h: Tensor, w: Tensor, b: Tensor) -> Tensor:
    """h (T, S, i) times w (o, i) shared or (T, o, i) per task, plus b (o,) or (T, o): (T, S, o) in one op."""
    return F.linear(h, w, b) if w.dim() == 2 else torch.baddbmm(b.unsqueeze(1), h, w.transpose(1, 2))


def times(d: Tensor, w: Tensor) -> Tensor:
    """d (T, S, o) times w (o, i) shared or (T, o, i) per task: (T, S, i)."""
    return d @ w if w.dim() == 2 else torch.bmm(d, w)


def forward(names: list, p: Params, x: Tensor) -> tuple[list[Tensor], list[Tensor], Tensor]:
    """x (T, S, in) through weights (o, i) shared or (T, o, i) per task -> (each layer's input, the ReLU
    masks (T, S, o), bool, the output (T, S, out))."""
    inputs, masks, h = [], [], x
    for n, (w, b) in enumerate(names):
        inputs.append(h)
        h = linear(h, p[w], p[b])  # (T, S, o)
        if n < len(names) - 1:
            masks.append(h > 0)
            h = h.relu()
    return inputs, masks, h


def backward(names: list, p: Params, inputs: list, masks: list, dout: Tensor) -> tuple[Params, list[Tensor]]:
    """Backprop of dL/dout (T, S, out) -> (per-task gradients {name: (T, *shape)}, dL/dz of every layer)."""
    grads, dz, dzs = {}, dout, [None] * len(names)
    for n in range(len(names) - 1, -1, -1):
        w, b = names[n]
        dzs[n] = dz
        grads[w] = torch.bmm(dz.transpose(1, 2), inputs[n])  # (T, o, i)
        grads[b] = dz.sum(1)  # (T, o)
        if n:
            dz = times(dz, p[w]) * masks[n - 1]  # (T, S, i)
    return grads, dzs


def hessian_vector(names: list, p: Params, inputs: list, masks: list, dzs: list, u: Params, curvature: float
                   ) -> Params:
    """Every task's support-loss Hessian at ``p`` times its direction ``u`` (T, *shape), by the R-operator:
    R{.} of the forward pass (``inputs``, ``masks`` of it), then of backprop (``dzs``); ``curvature``: the
    loss's d2L/dout2 (a multiple of the identity for the squared error)."""
    rz, r_inputs = None, [None]  # R{x} = 0: the first layer has no term from its input
    for n, (w, b) in enumerate(names):
        rz = linear(inputs[n], u[w], u[b])  # (T, S, o)
        if n:
            rz = rz + times(r_inputs[n], p[w].transpose(-1, -2))
        if n < len(names) - 1:
            r_inputs.append(rz * masks[n])
    out, rdz = {}, rz * curvature  # R{dL/dout}
    for n in range(len(names) - 1, -1, -1):
        w, b = names[n]
        g = torch.bmm(rdz.transpose(1, 2), inputs[n])
        if n:
            g = torch.baddbmm(g, dzs[n].transpose(1, 2), r_inputs[n])
        out[w], out[b] = g, rdz.sum(1)
        if n:
            rdz = torch.baddbmm(times(rdz, p[w]), dzs[n], u[w]) * masks[n - 1]
    return out


def meta_gradient(net: nn.Module, params: Params, alpha: float | Params, batch: tuple[Tensor, ...], steps: int,
                  first_order: bool) -> tuple[Tensor, Params, Params]:
    """(mean query loss, d/d theta, d/d alpha (empty for a float alpha)) of MAML under the squared error."""
    names = layer_names(net)
    xs, ys, xq, yq = batch
    T = len(xs)
    scale = 2.0 / ys[0].numel()  # L = mean((out - y)^2) over a task's points: dL/dout = scale (out - y)
    path, p = [], params
    for _ in range(steps):
        inputs, masks, out = forward(names, p, xs)
        g, dzs = backward(names, p, inputs, masks, scale * (out - ys))
        path.append((p, inputs, masks, dzs, g))
        p = {k: p[k] - alpha[k] * g[k] if isinstance(alpha, dict) else torch.add(p[k], g[k], alpha=-alpha) for k in p}
    inputs, masks, out = forward(names, p, xq)
    error = out - yq  # (T, S, out)
    loss = (error * error).mean()  # tasks of one size: the mean over tasks of each task's mean
    v, _ = backward(names, p, inputs, masks, (2.0 / yq[0].numel() / T) * error)
    d_alpha: Params = {}
    for p_j, inputs, masks, dzs, g in reversed(path):
        if isinstance(alpha, dict):
            for k in v:
                d_alpha[k] = d_alpha.get(k, 0) - (g[k] * v[k]).sum(0)
        if not first_order:
            u = {k: (alpha[k] if isinstance(alpha, dict) else alpha) * v[k] for k in v}
            hv = hessian_vector(names, p_j, inputs, masks, dzs, u, scale)
            v = {k: v[k] - hv[k] for k in v}
    return loss, {k: v[k].sum(0) if v[k].dim() > params[k].dim() else v[k] for k in v}, d_alpha


class MetaLoss(torch.autograd.Function):
    """The meta-loss as one autograd node: its forward computes the loss and the meta-gradient together,
    its backward scales the stored gradient (no second differentiation through it)."""

    @staticmethod
    def forward(ctx, net, params_alpha_batch, steps, first_order, *tensors):
        params, alpha, batch = params_alpha_batch
        loss, d_theta, d_alpha = meta_gradient(net, params, alpha, batch, steps, first_order)
        ctx.grads = [d_theta[k] for k in params] + [d_alpha[k] for k in (alpha if isinstance(alpha, dict) else {})]
        return loss

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        return (None, None, None, None, *[grad * g for g in ctx.grads])


def applies(net: nn.Module, loss_fn, batch: tuple[Tensor, ...]) -> bool:
    """This path covers the MLP with ReLU under ``F.mse_loss`` (the sinusoid), on data (T, S, in) with targets
    shaped as the net's output (T, S, out): other shapes keep ``mse_loss``'s broadcasting, by autograd."""
    layers = getattr(net, "body", None)
    if loss_fn is not F.mse_loss or layers is None or not all(isinstance(m, (nn.Linear, nn.ReLU)) for m in layers):
        return False
    out_dim = [m for m in layers if isinstance(m, nn.Linear)][-1].out_features
    xs, ys, xq, yq = batch
    return xs.dim() == xq.dim() == 3 and ys.shape == (*xs.shape[:2], out_dim) and yq.shape == (*xq.shape[:2], out_dim)


def meta_loss(net: nn.Module, params: Params, alpha: float | Params, batch: tuple[Tensor, ...], steps: int,
              first_order: bool) -> Tensor:
    """The mean query loss after adaptation, differentiable wrt ``params`` (and a dict ``alpha``)."""
    tensors = [*params.values(), *(alpha.values() if isinstance(alpha, dict) else [])]
    with torch.no_grad():
        plain = ({k: v.detach() for k, v in params.items()},
                 {k: v.detach() for k, v in alpha.items()} if isinstance(alpha, dict) else alpha,
                 tuple(t.detach() for t in batch))
    return MetaLoss.apply(net, plain, steps, first_order, *tensors)
