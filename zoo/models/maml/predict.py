"""MAML's inference API (a mixin of ``MAML``) and ``python -m zoo.predict`` for it.

    model = zoo.load("maml-sinusoid")
    f = model.adapt(x_support, y_support, steps=10)   # (K, 1) points of one task -> the adapted predictor
    f(x_query)                                        # (Q, 1) predictions of the adapted network

``adapt`` runs the inner loop the model was meta-trained and evaluated with (its step size; Meta-SGD:
its learned per-parameter ones) on one task's support set; classification models take images
(K, C, H, W) with labels 0..n_way-1 and predict logits (``f.predict`` gives classes).

Command line: ``python -m zoo.predict maml-sinusoid [-- x,y ...] [steps=10] [seed=0] [out=PNG]``: fine-tune
the meta-learned initialisation on the points given (or on K points of a random sinusoid task) and
write the paper's Figure 2 for them: the fit after 0, 1 and ``steps`` gradient steps. Put ``--`` before the
points, so that a point with a negative x (``-4,1.5``) is not read as a command-line flag."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn
from torch.func import functional_call

from zoo.errors import UserError
from zoo.models.maml import meta, plots
from zoo.paths import check_output_file, make_folder
from zoo.schema import between, validate

MAX_STEPS = 10_000  # gradient steps of fine-tuning: seconds at most (the paper shows 1 and 10)
MAX_SHOTS = 10_000  # points of the random task (0: the model's K); 10**8 runs out of memory


@dataclass
class PredictOptions:
    """``python -m zoo.predict maml-sinusoid [x,y ...] key=value``."""

    # gradient steps of fine-tuning on the support points
    steps: int = between(10, 0, MAX_STEPS, why="gradient steps of fine-tuning; the paper shows 1 and 10")
    seed: int = 0  # seed of the random task (no inputs)
    out: str = "maml_adaptation.png"  # the adaptation figure
    shots: int = between(0, 0, MAX_SHOTS, why="points of the random task; 0 = the model's K")  # K of the random task


@dataclass
class AdaptedPredictor:
    """The network with the weights ``adapt`` found for one task: call it on query inputs."""

    net: nn.Module
    params: dict[str, Tensor]  # the adapted weights (detached, on the model's device)
    input_shape: tuple[int, ...]  # one input's shape, as in the support set
    task: str  # regression / classification
    steps: int  # the inner steps taken

    def __call__(self, x: Tensor) -> Tensor:
        """Outputs (Q, out_dim) (classification: logits (Q, n_way)) of query inputs x (Q, *input_shape)."""
        x = _batch(x, self.input_shape, "the query", "the support set's inputs")
        with torch.no_grad():
            return functional_call(self.net, self.params, (x.to(self.params_device, self.params_dtype),))

    def predict(self, x: Tensor) -> Tensor:
        """Predicted classes (Q,) for classification, the outputs (Q, out_dim) for regression."""
        out = self(x)
        return out.argmax(-1) if self.task == "classification" else out

    @property
    def params_device(self) -> torch.device:
        return next(iter(self.params.values())).device

    @property
    def params_dtype(self) -> torch.dtype:
        return next(iter(self.params.values())).dtype


def _batch(x: Tensor, shape: tuple[int, ...], what: str, expected: str) -> Tensor:
    if not isinstance(x, Tensor) or not x.is_floating_point():
        raise UserError(f"{what} must be a float tensor (N, {', '.join(map(str, shape))}), got "
                        f"{type(x).__name__ if not isinstance(x, Tensor) else x.dtype}")
    if x.dim() != len(shape) + 1 or tuple(x.shape[1:]) != tuple(shape) or not len(x):
        raise UserError(f"{what} has shape {tuple(x.shape)}, but {expected} are (N, {', '.join(map(str, shape))}): "
                        "support and query points must have the same dimensions")
    if not torch.isfinite(x).all():
        raise UserError(f"{what} holds nan or infinite values")
    return x


class MAMLAPI:
    """Needs ``net``, ``params``, ``alpha``, ``loss_fn``, ``task``, ``cfg`` and ``data_info`` (module.py)."""

    def input_shape(self) -> tuple[int, ...]:
        info = self.data_info
        if self.task == "regression":
            return (int(info.get("in_dim", 1)),)
        return tuple(int(s) for s in info.get("image_shape", [1, 28, 28]))

    def adapt(self, x_support: Tensor, y_support: Tensor, steps: int | None = None) -> Callable[[Tensor], Tensor]:
        """Fine-tune the meta-learned weights on one task's support set and return the adapted predictor.

        x_support: (K, in_dim) points (classification: images (K, C, H, W)); y_support: (K, out_dim) targets
        (classification: labels (K,) in 0..n_way-1). ``steps``: inner gradient steps (None: those of
        meta-training, ``inner_steps``; the "pretrained on all tasks" baseline, trained with none, takes
        ``eval_inner_steps``), each theta - alpha grad L(support), alpha as in the model's evaluation."""
        c = self.cfg
        steps = (c.inner_steps or c.eval_inner_steps) if steps is None else steps
        if isinstance(steps, bool) or not isinstance(steps, int) or not 0 <= steps <= MAX_STEPS:
            raise UserError(f"steps must be an integer from 0 to {MAX_STEPS}, got {steps!r}")
        shape = self.input_shape()
        xs = _batch(x_support, shape, "x_support", "the model's inputs").to(self.device, self.dtype)
        ys = self._targets(y_support, len(xs)).to(self.device)
        params = {k: v.detach() for k, v in self.params().items()}
        alpha = self.alpha(evaluation=True)
        alpha = {k: v.detach() for k, v in alpha.items()} if isinstance(alpha, dict) else alpha
        # torch.func.grad needs autograd, also under a caller's no_grad / inference mode (zoo.predict's)
        with torch.inference_mode(False), torch.enable_grad():
            xs, ys = xs.clone(), ys.clone()
            params = meta.adapt(self.net, params, alpha, xs, ys, self.loss_fn, steps, first_order=True)
        return AdaptedPredictor(self.net, {k: v.detach() for k, v in params.items()}, shape, self.task, steps)

    def _targets(self, y: Tensor, k: int) -> Tensor:
        if not isinstance(y, Tensor):
            raise UserError(f"y_support must be a tensor, got {type(y).__name__}")
        if self.task == "classification":
            n_way = int(self.data_info["n_way"])
            if y.shape != (k,) or y.is_floating_point() or (len(y) and not 0 <= int(y.min()) <= int(y.max()) < n_way):
                raise UserError(f"y_support must be ({k},) integer labels in 0..{n_way - 1} (one per support image), "
                                f"got {tuple(y.shape)} {y.dtype}")
            return y.long()
        out_dim = int(self.data_info.get("out_dim", 1))
        if y.shape == (k,) and out_dim == 1:
            y = y[:, None]
        if y.shape != (k, out_dim) or not y.is_floating_point() or not torch.isfinite(y).all():
            raise UserError(f"y_support must be finite float targets ({k}, {out_dim}), one per support point, "
                            f"got {tuple(y.shape)} {y.dtype}")
        return y.to(self.dtype)


def parse_points(inputs: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    xs, ys = [], []
    for item in inputs:
        try:
            x, y = (float(v) for v in item.split(","))
        except ValueError:
            raise UserError(f"cannot read point '{item}': give points as x,y (e.g. 1.5,-0.3)") from None
        if not (math.isfinite(x) and math.isfinite(y)):  # fine-tuning on it makes every prediction nan
            raise UserError(f"point '{item}' is not finite: give points as finite numbers x,y (e.g. 1.5,-0.3)")
        xs.append(x)
        ys.append(y)
    x = torch.tensor(xs).unsqueeze(-1)  # cpu: (K, 1), moved to the model's device by the caller
    y = torch.tensor(ys).unsqueeze(-1)  # cpu: (K, 1)
    return x, y


def predict_cli(model, inputs: list[str], options: dict) -> None:
    if model.task != "regression":
        raise UserError("zoo.predict adapts regression MAML models (sinusoid); for classification use "
                        "python -m zoo.evaluate")
    opts = validate(PredictOptions, options, "maml predict", what="option")
    steps, seed, shots = opts["steps"], opts["seed"], opts["shots"]
    given = [k for k in ("shots", "seed") if k in options]
    if inputs and given:  # else ignored without a word
        named, several = " and ".join(f"{k}=" for k in given), len(given) > 1
        raise UserError(f"{named} {'choose' if several else 'chooses'} the random task; with points given, the "
                        f"points are the task: leave {'them' if several else 'it'} out, or give no points")
    check_output_file(opts["out"], "out", "figure")  # before fine-tuning, not after
    shown = sorted({0, min(1, steps), steps})
    with torch.inference_mode(False):
        if inputs:
            xs, ys = parse_points(inputs)
            points = (xs.to(model.device, model.dtype), ys.to(model.device, model.dtype))
            if not all(torch.isfinite(t).all() for t in points):  # 1e39 is inf in float32
                raise UserError(f"a point is too large for the model's {model.dtype} (it becomes infinite): give "
                                "values of the sinusoids' scale (|x|, |y| up to about 5)")
            lo, hi = model.data_info.get("x_range", [-5.0, 5.0])  # the range the model was meta-trained on
            grid = torch.linspace(lo, hi, 11, device=model.device, dtype=model.dtype).unsqueeze(-1)  # (11, 1)
            preds = model.adapt(*points, steps)(grid).squeeze(-1)
            if not torch.isfinite(preds).all():  # fine-tuning diverged: nothing to print or draw
                raise UserError(f"fine-tuning on these points diverged ({steps} steps gave non-finite predictions): "
                                f"they are far outside the tasks the model was meta-trained on (x in [{lo:g}, {hi:g}], "
                                "|y| up to about 5); give points of that scale, or fewer steps=")
            fig = plots.sinusoid_adaptation(model, steps=tuple(shown), points=points)
            print(f"fine-tuned on {len(xs)} points for {steps} steps; predictions:")
            for x, y in zip(grid.squeeze(-1).tolist(), preds.tolist()):
                print(f"  x={x:+.1f}  y={y:+.3f}")
        else:
            fig = plots.sinusoid_adaptation(model, seed=seed, steps=tuple(shown), shots=shots or None)
            print(f"random task (seed={seed}); the picture shows its true sine, the K points and the fits")
    make_folder(Path(opts["out"]).parent)
    fig.savefig(opts["out"], dpi=110, bbox_inches="tight")
    print(f"wrote {opts['out']}")
