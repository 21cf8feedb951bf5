"""MAML's inference API (maml/predict.py): ``adapt`` on the sinusoid test tasks reproduces the card's MSE after
1 and 10 steps, it is zoo.predict's fit, classification models adapt too, and mismatched inputs are clear errors."""

import pytest
import torch
import torch.nn.functional as F

import zoo
from tests.api_testlib import model_datamodule
from zoo.errors import UserError
from zoo.models.maml.module import MAML


@pytest.fixture(scope="module")
def model():
    return zoo.load("maml-sinusoid")


def test_adapt_on_the_test_tasks_reproduces_the_cards_mse(model):
    """The card's test/loss_1 and test/loss_10 (zoo.evaluate's, tests/maml/test_maml_pretrained.py) are the mean
    query MSE of the 600 fixed test tasks after adapt(steps=1) and adapt(steps=10), task by task here."""
    xs, ys, xq, yq = model_datamodule(model).test_set.tensors  # (600, 10, 1), ..., (600, 100, 1)
    card = model.run_info["card"]["metrics"]
    for steps in (1, 10):
        mse = torch.stack([F.mse_loss(model.adapt(xs[i], ys[i], steps)(xq[i]), yq[i]) for i in range(len(xs))])
        assert abs(mse.mean().item() - card[f"test/loss_{steps}"]) < 1e-4, steps


def test_adapted_predictor(model):
    g = torch.Generator().manual_seed(0)
    x = torch.rand(10, 1, generator=g) * 10 - 5
    y = 2 * torch.sin(x + 1)
    f0, f1 = model.adapt(x, y, steps=0), model.adapt(x, y)  # default: the 1 inner step of meta-training
    assert f1.steps == model.cfg.inner_steps == 1
    grid = torch.linspace(-5, 5, 7).unsqueeze(-1)
    out = f1(grid)
    assert out.shape == (7, 1) and not out.requires_grad and torch.equal(out, model.adapt(x, y)(grid))
    assert F.mse_loss(f1(x), y) < F.mse_loss(f0(x), y)  # one step adapts
    assert torch.equal(f0(grid), model.net(grid).detach())  # no step: the meta-learned initialisation
    assert torch.equal(model.adapt(x, y[:, 0])(grid), out)  # (K,) targets of a 1-d output too
    with torch.inference_mode():  # as zoo.predict calls it
        assert torch.equal(model.adapt(x, y)(grid), out)


def test_classification_models_adapt_and_predict_classes():
    info = {"task": "classification", "n_way": 3, "shots": 1, "image_shape": [1, 12, 12]}
    torch.manual_seed(0)
    model = MAML({"filters": 4, "inner_lr": 0.4}, info).eval()
    x = torch.rand(6, 1, 12, 12)
    y = torch.tensor([0, 1, 2, 0, 1, 2])
    f = model.adapt(x, y, steps=5)
    assert f(x).shape == (6, 3) and f.predict(x).shape == (6,) and f.predict(x).dtype == torch.int64
    assert F.cross_entropy(f(x), y) < F.cross_entropy(model.adapt(x, y, steps=0)(x), y)
    with pytest.raises(UserError, match=r"y_support must be \(6,\) integer labels in 0..2"):
        model.adapt(x, torch.tensor([0, 1, 2, 0, 1, 3]))
    with pytest.raises(UserError, match=r"x_support has shape \(6, 1, 28, 28\), but the model's inputs are \(N, 1, 12"):
        model.adapt(torch.rand(6, 1, 28, 28), y)


@pytest.mark.parametrize("call, expected", [
    (lambda m: m.adapt(torch.rand(5, 2), torch.rand(5, 1)), r"x_support has shape \(5, 2\), but the model's inputs"),
    (lambda m: m.adapt(torch.rand(5, 1), torch.rand(4, 1)), r"y_support must be finite float targets \(5, 1\)"),
    (lambda m: m.adapt(torch.rand(5, 1), torch.rand(5, 1))(torch.rand(3, 2)),
     r"the query has shape \(3, 2\), but the support set's inputs are \(N, 1\): support and query"),
    (lambda m: m.adapt(torch.rand(5, 1), torch.rand(5, 1), steps=-1), "steps must be an integer from 0"),
    (lambda m: m.adapt(torch.ones(5, 1).long(), torch.rand(5, 1)), "x_support must be a float tensor"),
    (lambda m: m.adapt(torch.full((5, 1), float("inf")), torch.rand(5, 1)), "nan or infinite"),
])
def test_bad_input_is_one_clear_error(model, call, expected):
    with pytest.raises(UserError, match=expected):
        call(model)
