"""Why a long-trained MAML sinusoid model can diverge after its first test-time step: the curvature
of each test task's support loss along the fine-tuning path, against the stability limit of
gradient descent.

Gradient descent with step alpha on a loss whose Hessian has top eigenvalue lambda is stable only
if alpha * lambda < 2 (on a quadratic, the error along that eigenvector is multiplied by
|1 - alpha lambda| every step). For each of the 600 test tasks of ``maml_sinusoid.py`` this script
fine-tunes a saved model for 10 steps of alpha = 0.01 on the K support points and measures lambda
(power iteration on Hessian-vector products, ``torch.func``) at theta_0, theta_1 and theta_2, then
compares the tasks whose MSE blew up with the rest.

    python benchmarks/maml_sinusoid.py --seeds 0 --shots 5 --methods maml --save-models /tmp/maml_models
    python studies/maml_sharpness.py --models /tmp/maml_models
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from torch.func import functional_call, grad, vmap

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.common.devices import add_device_option, processor, resolve_device  # noqa: E402  benchmarks/common/devices.py

ALPHA, STEPS, POWER_ITERATIONS = 0.01, 10, 60


def top_eigenvalue(net, params: dict, x, y, loss_fn, v: dict) -> torch.Tensor:
    """Largest Hessian eigenvalue (by magnitude) of one task's support loss at ``params``, by power
    iteration from the vector ``v`` (shaped like params)."""
    def loss(p):
        return loss_fn(functional_call(net, p, (x,)), y)

    def hvp(v):  # reverse over reverse: grad_p <grad L(p), v>
        return grad(lambda p: sum((gk * v[k]).sum() for k, gk in grad(loss)(p).items()))(params)

    lam = x.new_zeros(())
    for _ in range(POWER_ITERATIONS):
        norm = torch.sqrt(sum((t ** 2).sum() for t in v.values()))
        v = {k: t / norm for k, t in v.items()}
        hv = hvp(v)
        lam = sum((hv[k] * v[k]).sum() for k in v)  # Rayleigh quotient
        v = hv
    return lam


def analyse(path: Path, shots: int, device: torch.device) -> dict:
    from safetensors.torch import load_file

    from zoo.models.maml import meta
    from zoo.models.maml.data import SinusoidData
    from zoo.models.maml.module import MAML

    data = SinusoidData({"shots": shots, "eval_query": 100})
    data.setup("fit")
    model = MAML({"inner_steps": 1, "eval_inner_steps": STEPS}, data.info()).to(device)
    model.load_state_dict(load_file(str(path)))
    xs, ys, xq, yq = (t.to(device) for t in data.fixed_tasks(data.cfg.test_tasks, data.cfg.eval_seed + 1))
    net, theta = model.net, {k: v.detach() for k, v in model.params().items()}
    curve, _ = meta.adaptation_curve(net, theta, ALPHA, (xs, ys, xq, yq), model.loss_fn, STEPS)  # (600, 11)

    g = torch.Generator().manual_seed(0)  # cpu: one fixed start vector for every task
    v0 = {k: torch.randn(p.shape, generator=g).to(p) for k, p in theta.items()}  # cpu: seeded draw, then moved

    def per_task(x, y):  # lambda_max at theta_0, theta_1, theta_2 of one task
        p, lams = theta, []
        for _ in range(3):
            lams.append(top_eigenvalue(net, p, x, y, model.loss_fn, v0))
            p = meta.adapt(net, p, ALPHA, x, y, model.loss_fn, 1, first_order=True)
        return torch.stack(lams)

    with torch.enable_grad():
        lams = torch.cat([vmap(per_task)(xs[i:i + 100], ys[i:i + 100])
                          for i in range(0, len(xs), 100)])  # (600, 3)
    end = curve[:, -1]
    blown = ~torch.isfinite(end) | (end > 10 * curve[:, 0])
    amplitude = yq.abs().amax((1, 2))  # (600,) about the task's amplitude (100 query points)
    unstable = ALPHA * lams > 2  # (600, 3)

    def group(mask):
        if not mask.any():
            return {"tasks": 0}
        scaled = (ALPHA * lams[mask]).median(0).values  # (3,) median alpha * lambda at theta_0, 1, 2
        return {"tasks": int(mask.sum()),
                "alpha_lambda_median_at_theta_0_1_2": [round(float(v), 3) for v in scaled],
                "share_unstable_at_theta_0_1_2": [round(float(v), 3) for v in unstable[mask].float().mean(0)],
                "amplitude_median": round(float(amplitude[mask].median()), 2),
                "mse_median_after_0_1_10": [round(float(curve[mask][:, j].nanmedian()), 3) for j in (0, 1, STEPS)]}

    return {"model": path.name, "shots": shots, "alpha": ALPHA, "tasks": len(curve),
            "mse_mean_after_0_1_5_10": [round(float(curve[:, j].mean()), 4) for j in (0, 1, 5, STEPS)],
            "mse_median_after_0_1_5_10": [round(float(curve[:, j].nanmedian()), 4) for j in (0, 1, 5, STEPS)],
            "blown_up": group(blown), "others": group(~blown),
            "tasks_unstable_at_theta_1": int(unstable[:, 1].sum())}


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--models", required=True, help="folder of <method>_<K>shot_seed<S>.safetensors")
    add_device_option(p)
    p.add_argument("--out", default=str(ROOT / "studies/results/maml_sharpness.json"))
    args = p.parse_args()
    device = resolve_device(args.device)
    torch.set_num_threads(1)
    rows = []
    for path in sorted(Path(args.models).glob("maml_*shot_seed*.safetensors")):
        shots = int(path.stem.split("_")[1].removesuffix("shot"))
        rows.append(analyse(path, shots, device))
        print(json.dumps(rows[-1]), flush=True)
    record = {"command": "python " + " ".join(sys.argv), "device": str(device), "torch": torch.__version__,
              "machine": processor(),
              "stability_rule": "gradient descent is stable along an eigenvector only if alpha * lambda < 2",
              "runs": rows}
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
