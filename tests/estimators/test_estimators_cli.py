"""`python -m zoo.estimators compare` runs and reports sane numbers; the gradient-variance callback
logs a finite positive variance during a tiny training run without changing the training itself."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import lightning as L
import pytest
import torch

from zoo.callbacks.grad_variance import GradientVarianceCallback
from zoo.estimators import get_estimator

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_compare_cli_json_and_plot(tmp_path):
    png = tmp_path / "cmp.png"
    out = subprocess.run([sys.executable, "-m", "zoo.estimators", "compare", "--draws", "2000", "--seed", "1",
                          "--json", "--out", str(png)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    g = result["gaussian"]
    assert g["exact"] == 12.0  # 2a(a*0 + b) with a=2, b=3
    rows = {r["estimator"]: r for r in g["rows"]}
    assert abs(rows["reparam"]["mean"] - 12.0) < 4 * rows["reparam"]["stderr"]
    assert rows["reinforce"]["variance"] > 10 * rows["reparam"]["variance"]  # the point of Xu's softmax lecture notes
    cat = {r["estimator"]: r for r in result["categorical"]["rows"]}
    assert "reparam" not in cat  # no rsample for categoricals: skipped
    assert cat["expectation"]["variance"] < 1e-10 and cat["expectation"]["bias_norm"] < 1e-5
    assert cat["gumbel_softmax"]["bias_norm"] > 5 * cat["gumbel_softmax"]["stderr"]
    assert "arm" not in cat and "disarm" not in cat  # binary-only: skipped on K = 5
    binary = {r["estimator"]: r for r in result["binary"]["rows"]}
    for name in ("arm", "disarm", "rloo"):  # unbiased within 4 standard errors (seed 1, 2,000 draws)
        assert binary[name]["bias_norm"] < 4 * binary[name]["stderr"], name
    assert binary["disarm"]["variance"] < binary["rloo"]["variance"]  # 2 cost evaluations each
    assert png.exists() and png.stat().st_size > 10000


@pytest.fixture(scope="module")
def small_compare():
    """compare.run at 200 draws and a 2-step warm-up: the numbers' shape, seconds on one core."""
    from zoo.estimators import compare

    return compare.run(draws=200, seed=0, warmup=2)


def test_compare_writes_its_picture_under_runs_not_into_the_working_folder(tmp_path, monkeypatch, capsys,
                                                                          small_compare):
    """Without --out the picture goes to runs/estimators/compare.png: nothing else lands in the working folder."""
    from zoo.estimators import compare
    from zoo.estimators.__main__ import DEFAULT_OUT, main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(compare, "run", lambda **kw: small_compare)  # the draws are the tests' above and below
    assert main(["compare", "--draws", "200"]) == 0
    assert [p.name for p in tmp_path.iterdir()] == ["runs"]
    assert (tmp_path / DEFAULT_OUT).stat().st_size > 10000
    assert f"plot: {DEFAULT_OUT}" in capsys.readouterr().out


def test_compare_cli_table_and_errors(capsys, small_compare):
    from zoo.estimators import compare
    from zoo.estimators.__main__ import main

    assert main(["compare", "--draws", "1", "--out", ""]) == 2  # a user error: exit status 2, one line
    assert "--draws" in capsys.readouterr().err

    text = compare.format_table(small_compare)
    assert "reinforce+ema" in text and "expectation" in text and "exact = 2a(a*theta+b) = 12.0000" in text


class TinyModel(L.LightningModule):
    """Logits from a linear encoder, one categorical per input, cost depends on the category and on a
    learned decoder weight; REINFORCE with an EMA baseline (a buffer the callback must restore)."""

    def __init__(self):
        super().__init__()
        self.enc = torch.nn.Linear(4, 3)
        self.dec = torch.nn.Parameter(torch.tensor([1.0, 2.0, 3.0]))
        self.estimator = get_estimator("reinforce", baseline="ema")

    def estimator_loss(self, batch):
        (x,) = batch
        s = self.estimator.sample(self.enc(x))  # value (1, B, 3)
        cost = (s.value @ self.dec - x.sum(-1)) ** 2  # (1, B)
        return self.estimator.loss(s, cost)

    def estimator_parameters(self):
        return self.enc.parameters()

    def training_step(self, batch, batch_idx):
        return self.estimator_loss(batch)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def _train(callbacks):
    L.seed_everything(0, verbose=False)
    model = TinyModel()
    data = torch.utils.data.TensorDataset(torch.randn(64, 4))
    loader = torch.utils.data.DataLoader(data, batch_size=16)
    trainer = L.Trainer(accelerator="cpu", max_steps=6, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, callbacks=callbacks)
    trainer.fit(model, loader)
    return model, trainer


def test_grad_variance_callback_logs_and_does_not_disturb_training():
    cb = GradientVarianceCallback(every_n_steps=2, repeats=4)
    model, trainer = _train([cb])
    assert [h["step"] for h in cb.history] == [2, 4, 6]
    for h in cb.history:
        assert math.isfinite(h["grad_var"]) and h["grad_var"] > 0 and h["grad_snr"] > 0
    assert math.isfinite(float(trainer.callback_metrics["grad_var"]))
    plain, _ = _train([])
    for a, b in zip(model.state_dict().values(), plain.state_dict().values()):
        assert torch.equal(a, b)  # same parameters and EMA buffer as a run without the callback
