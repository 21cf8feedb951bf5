"""``python -m zoo.predict maml-sinusoid [-- x,y ...] [steps=10] [seed=0] [out=PNG]``: fine-tune the
meta-learned initialisation on the points given (or on K points of a random sinusoid task) and
write the paper's Figure 2 for them: the fit after 0, 1 and ``steps`` gradient steps. Put ``--`` before the
points, so that a point with a negative x (``-4,1.5``) is not read as a command-line flag."""

from __future__ import annotations

import math
from pathlib import Path

import torch

from zoo.core.module import check_options
from zoo.errors import UserError
from zoo.paths import check_output_file, make_folder

DEFAULTS = {"steps": 10, "seed": 0, "out": "maml_adaptation.png", "shots": 0}
MAX_STEPS = 10_000  # gradient steps of fine-tuning: seconds at most (the paper shows 1 and 10)
MAX_SHOTS = 10_000  # points of the random task (0: the model's K); 10**8 was killed for memory


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
    from zoo.models.maml import plots  # imported when used: torch

    if model.task != "regression":
        raise UserError("zoo.predict adapts regression MAML models (sinusoid); for classification use "
                        "python -m zoo.evaluate")
    opts = check_options(options, DEFAULTS, "maml predict")
    steps, seed, shots = int(opts["steps"]), int(opts["seed"]), int(opts["shots"])
    if not 0 <= steps <= MAX_STEPS:
        raise UserError(f"steps={steps} must be from 0 to {MAX_STEPS} (gradient steps of fine-tuning; "
                        "the paper shows 1 and 10)")
    if not 0 <= shots <= MAX_SHOTS:
        raise UserError(f"shots={shots} must be from 0 to {MAX_SHOTS} (points of the random task; "
                        f"0 = the model's K, {model.data_info.get('shots', 10)})")
    given = [k for k in ("shots", "seed") if k in options]
    if inputs and given:  # ignored without a word before
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
            preds = plots.adapted_predictions(model, *points, grid, [steps])[steps].squeeze(-1)
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
