"""The paper's networks as plain nn.Modules (Finn, Abbeel & Levine 2017, sections 5.1-5.3).

MAML adapts their parameters functionally (``torch.func.functional_call`` with a dict of adapted
tensors), so the modules themselves hold only the meta-parameters theta.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class MLP(nn.Module):
    """``in -> hidden x layers (ReLU) -> out``: the sinusoid regressor (1 -> 40 -> 40 -> 1) and the
    navigation policy's mean (2 -> 100 -> 100 -> 2)."""

    def __init__(self, in_dim: int = 1, out_dim: int = 1, hidden: int = 40, layers: int = 2):
        super().__init__()
        dims = [in_dim] + [hidden] * layers
        blocks: list[nn.Module] = []
        for a, b in zip(dims[:-1], dims[1:]):
            blocks += [nn.Linear(a, b), nn.ReLU()]
        self.body = nn.Sequential(*blocks, nn.Linear(dims[-1], out_dim))

    def forward(self, x: Tensor) -> Tensor:  # (..., in) -> (..., out)
        return self.body(x)

    @torch.no_grad()
    def paper_init(self, std: float = 0.01) -> None:
        """The initialisation of the paper's code: weights from a normal with std 0.01 truncated at
        2 std, biases 0 (PyTorch's default is uniform, +-1/sqrt(fan_in), biases included)."""
        for layer in self.body:
            if isinstance(layer, nn.Linear):
                nn.init.trunc_normal_(layer.weight, std=std, a=-2 * std, b=2 * std)
                nn.init.zeros_(layer.bias)

    def batched_forward(self, params: dict[str, Tensor], x: Tensor) -> Tensor:
        """T tasks at once, each under its own parameters: ``params`` keyed like named_parameters(),
        each (T, *shape); x (T, ..., in) -> (T, ..., out). One ``bmm`` per layer: what
        ``vmap(functional_call)`` computes, without vmap's per-op dispatch (meta.task_losses)."""
        out = x if x.dim() == 3 else x.reshape(x.shape[0], -1, x.shape[-1])  # (T, S, in)
        for i, layer in enumerate(self.body):
            if isinstance(layer, nn.Linear):
                w, b = params[f"body.{i}.weight"], params[f"body.{i}.bias"]  # (T, o, i), (T, o)
                out = torch.bmm(out, w.transpose(-1, -2)) + b.unsqueeze(-2)
            else:
                out = layer(out)
        return out if x.dim() == 3 else out.reshape(*x.shape[:-1], out.shape[-1])


class BatchNorm32(nn.BatchNorm2d):
    """Batch norm computed in float32 under autocast (bf16-mixed / 16-mixed). With torch.func's vmap,
    batch norm on bfloat16 inputs fails in backward ("expected scalar type BFloat16 but found
    Float", torch 2.x, found with ``trainer.precision=bf16-mixed`` on the CPU); normalising in
    float32 is also what mixed precision recommends. Same parameters and state-dict keys."""

    def forward(self, x: Tensor) -> Tensor:
        if x.dtype not in (torch.bfloat16, torch.float16):  # float32 / float64 runs: unchanged
            return super().forward(x)
        with torch.autocast(x.device.type, enabled=False):
            return super().forward(x.float())


class ConvNet(nn.Module):
    """The paper's few-shot classifier: 4 x [3x3 conv (64 filters), batch norm, ReLU], then a linear
    layer to the N classes. Omniglot version: stride-2 convolutions instead of max pooling
    (28 -> 14 -> 7 -> 4 -> 2) and the features averaged over space, as in the paper's code.

    Batch norm uses the statistics of the batch it sees, always: ``track_running_stats=False``, so
    there are no running statistics shared across tasks (each task is normalised by its own
    support or query batch, in training and at test time, as in the paper), and under ``vmap``
    every task of the meta-batch gets its own statistics."""

    def __init__(self, n_way: int = 5, in_channels: int = 1, filters: int = 64, blocks: int = 4):
        super().__init__()
        layers: list[nn.Module] = []
        c = in_channels
        for _ in range(blocks):
            layers += [nn.Conv2d(c, filters, 3, stride=2, padding=1),
                       BatchNorm32(filters, track_running_stats=False), nn.ReLU()]
            c = filters
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(filters, n_way)

    def forward(self, x: Tensor) -> Tensor:  # (B, C, H, W) -> (B, N) logits
        return self.head(self.features(x).mean((-2, -1)))  # (B, F) after the spatial mean

    def batched_forward(self, params: dict[str, Tensor], x: Tensor, grouped: bool | None = None) -> Tensor:
        """T tasks at once, each under its own parameters: ``params`` keyed like named_parameters(), each
        (T, *shape); x (T, B, C, H, W) -> (T, B, N) logits: what ``vmap(functional_call)`` computes (up to
        rounding), in the kernels each device runs fastest. ``grouped`` (None: off the CPU): the tasks'
        channels side by side, (B, T*C, H, W), so that each convolution is one grouped convolution (tasks as
        groups) and batch norm with each task's statistics one ``batch_norm`` over T*F channels. The CPU runs
        grouped convolutions slower than one plain convolution per task (benchmarks/maml_vs_loop.py), so
        there each task's forward runs on its own (meta.task_losses)."""
        T, B = x.shape[:2]
        if not (x.device.type != "cpu" if grouped is None else grouped):
            names, per_task = list(params), zip(*(v.unbind(0) for v in params.values()))
            return torch.stack([torch.func.functional_call(self, dict(zip(names, p)), (xt,))
                                for p, xt in zip(per_task, x.unbind(0))])
        h = x.transpose(0, 1).reshape(B, -1, *x.shape[-2:])  # (B, T*C, H, W)
        for i in range(0, len(self.features), 3):
            conv, norm = self.features[i], self.features[i + 1]
            w, b = params[f"features.{i}.weight"], params[f"features.{i}.bias"]  # (T, F, C, k, k), (T, F)
            h = F.conv2d(h, w.flatten(0, 1), b.flatten(), conv.stride, conv.padding, groups=T)  # (B, T*F, H', W')
            w, b = params[f"features.{i + 1}.weight"], params[f"features.{i + 1}.bias"]  # (T, F)
            h = torch.relu(batch_norm32(h, w.flatten(), b.flatten(), norm.eps))
        features = h.mean((-2, -1)).view(B, T, -1).transpose(0, 1)  # (T, B, F)
        w, b = params["head.weight"], params["head.bias"]  # (T, N, F), (T, N)
        return torch.baddbmm(b.unsqueeze(1).to(features.dtype), features, w.transpose(1, 2).to(features.dtype))


def batch_norm32(x: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
    """Batch norm with the batch's statistics, in float32 under mixed precision (as ``BatchNorm32``)."""
    if x.dtype not in (torch.bfloat16, torch.float16):  # float32 / float64 runs: as they come
        return F.batch_norm(x, None, None, weight.to(x.dtype), bias.to(x.dtype), training=True, eps=eps)
    with torch.autocast(x.device.type, enabled=False):
        return F.batch_norm(x.float(), None, None, weight.float(), bias.float(), training=True, eps=eps).to(x.dtype)
