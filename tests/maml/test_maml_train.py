"""Sinusoid tasks, meta-training through zoo.train, evaluation, bad input."""

import math

import pytest
import torch

from zoo.models.maml.data import SinusoidData
from zoo.models.maml.module import MAML
from zoo.train import main, train


def test_sinusoid_tasks_follow_the_paper_and_are_reproducible():
    data = SinusoidData({"shots": 5, "query": 7, "meta_batch": 25, "seed": 3})
    data.setup("fit")
    xs, ys, xq, yq = data.train_set[(4, 2)]
    assert xs.shape == (25, 5, 1) and xq.shape == (25, 7, 1)
    x = torch.cat([xs, xq], 1)
    assert x.min() >= -5 and x.max() <= 5
    assert torch.equal(data.train_set[(4, 2)][0], xs)  # same (epoch, index) -> same tasks
    assert not torch.equal(data.train_set[(4, 3)][0], xs)  # another epoch -> other tasks
    # y = A sin(x - phi): recover A from two points of each task via least squares on (sin x, cos x)
    y = torch.cat([ys, yq], 1)
    basis = torch.cat([torch.sin(x), -torch.cos(x)], -1)  # A sin(x - phi) = A cos(phi) sin x - A sin(phi) cos x
    coef = torch.linalg.lstsq(basis, y).solution.squeeze(-1)  # (T, 2): A cos phi, A sin phi
    amp, phase = coef.norm(dim=-1), torch.atan2(coef[:, 1], coef[:, 0])
    assert amp.min() >= 0.1 - 1e-4 and amp.max() <= 5 + 1e-4
    assert phase.min() >= -1e-4 and phase.max() <= math.pi + 1e-4
    # test tasks are fixed by eval_seed, whatever the training seed
    other = SinusoidData({"shots": 5, "seed": 9})
    other.setup("fit")
    ours = SinusoidData({"shots": 5, "seed": 3})
    ours.setup("fit")
    assert torch.equal(other.test_set[0][0], ours.test_set[0][0])
    assert len(ours.test_set.tensors[0]) == 600 and ours.test_set.tensors[3].shape[1] == 100


def curve_after(model, data, steps=1):
    losses, _ = model.curve(data.val_set[0], steps)
    return losses.mean(0)


def test_short_meta_training_reduces_post_adaptation_mse():
    """Seed 0, 400 meta-iterations: the mean MSE after one inner step on 100 held-out tasks falls below
    two thirds of the untrained net's, and after training one step helps (loss_1 < loss_0). The batched
    path (the loop computes the same gradients: test_maml_meta.py)."""
    torch.manual_seed(0)
    data = SinusoidData({"shots": 10, "val_tasks": 100, "seed": 0})
    data.setup("fit")
    model = MAML({"path": "batched"}, data.info())
    before = curve_after(model, data)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for i in range(400):
        loss = model.meta_loss(data.train_set[(i, 0)])
        opt.zero_grad()
        loss.backward()
        opt.step()
    after = curve_after(model, data)
    assert after[1] < 0.67 * before[1], (before, after)
    assert after[1] < after[0]


def test_zoo_train_reports_losses_after_each_inner_step(tmp_path):
    result = train(["recipe=maml_sinusoid", f"run_dir={tmp_path}", "trainer.max_epochs=2",
                    "data.steps_per_epoch=150", "data.test_tasks=100", "model.eval_inner_steps=3",
                    "trainer.enable_progress_bar=false", "model.plot_every_n_epochs=1"])
    m = result.test_metrics
    assert {f"test/loss_{j}" for j in range(4)} <= set(m) and "test/loss_3_ci95" in m
    assert m["test/loss_3"] < m["test/loss_0"]  # fine-tuning on the K points helps
    assert m["test/loss"] == m["test/loss_3"]
    assert (result.run_dir / "plots" / "adaptation.png").is_file()
    header = (result.run_dir / "logs" / "metrics.csv").read_text().splitlines()[0].split(",")
    assert {f"val/loss_{j}" for j in range(4)} <= set(header)  # validation reports every step too
    assert (result.run_dir / "plots" / "steps_curve.png").is_file()


def test_paper_init_is_a_truncated_normal_with_zero_biases():
    """model.init=paper: every MLP weight in [-0.02, 0.02] with the std of a normal(0, 0.01) cut at
    2 std, 0.0088 (seed 0, 1,680 weights: tolerance 0.0005, ~3 standard errors), every bias 0; the
    default keeps PyTorch's uniform init (the first layer's fan-in is 1: weights up to 1)."""
    torch.manual_seed(0)
    paper = MAML({"init": "paper"}, {"task": "regression"}).net
    weights = torch.cat([p.flatten() for n, p in paper.named_parameters() if n.endswith("weight")])
    assert weights.abs().max() <= 0.02 and abs(float(weights.std()) - 0.0088) < 0.0005
    assert all(float(p.abs().max()) == 0 for n, p in paper.named_parameters() if n.endswith("bias"))
    default = MAML({}, {"task": "regression"}).net
    assert float(default.body[0].weight.abs().max()) > 0.5


def test_meta_sgd_learns_its_step_sizes():
    torch.manual_seed(0)
    data = SinusoidData({"shots": 10, "seed": 0})
    data.setup("fit")
    model = MAML({"meta_sgd": True}, data.info())
    assert len(list(model.inner_lrs.parameters())) == len(list(model.net.parameters()))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for i in range(20):
        loss = model.meta_loss(data.train_set[(i, 0)])
        opt.zero_grad()
        loss.backward()
        opt.step()
    lrs = torch.cat([p.flatten() for p in model.inner_lrs.parameters()])
    assert (lrs - 0.01).abs().max() > 1e-3  # moved away from the initial alpha


@pytest.mark.parametrize("override, words", [
    ("model.inner_steps=-1", "inner_steps"),
    ("model.eval_inner_steps=-2", "eval_inner_steps"),
    ("data.shots=0", "shots"),
    ("model.path=fast", "path"),
    ("model.init=xavier", "init"),
])
def test_bad_sinusoid_settings_exit_2(override, words, tmp_path, capsys):
    code = main(["recipe=maml_sinusoid", f"run_dir={tmp_path}", override, "trainer.fast_dev_run=true"])
    err = capsys.readouterr().err
    assert code == 2 and words in err and "Traceback" not in err
    assert not any(tmp_path.rglob("*.ckpt"))
