"""`callbacks: [{name: ema}]` on the OOD classifier: the temperature, max-softmax threshold and
ODIN's (T, eps) are fitted on the averaged weights at every validation and kept out of the
averaging, so the model, last.ckpt and the test metrics carry the values the last validation chose.
(Lightning's EMAWeightAveraging alone writes them into the live weights and averages them: the
temperature ends where it started, 1.0, after one epoch.)"""

import csv

import pytest
import torch

from zoo.loading import load_checkpoint
from zoo.train import train

SHORT = ["trainer.limit_train_batches=4", "trainer.limit_val_batches=1", "trainer.limit_test_batches=1",
         "trainer.enable_progress_bar=false", "model.odin_temperatures=[1,1000]", "model.odin_eps=[0,0.002]",
         "model.odin_every_n_epochs=1", "model.mahalanobis=false", "model.plot_every_n_epochs=100"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return train(["recipe=ood_digits_joint", f"run_dir={tmp_path_factory.mktemp('ema')}", "trainer.max_epochs=2",
                  "callbacks=[{name: ema, decay: 0.9}]", *SHORT])


def _last_logged(run_dir) -> dict:
    rows = list(csv.DictReader(open(run_dir / "logs" / "metrics.csv")))
    return [r for r in rows if r.get("val/temperature")][-1]


def test_fitted_buffers_are_the_last_validations_choice(run):
    logged = _last_logged(run.run_dir)
    m = run.model
    assert float(m.temperature) != 1.0
    assert float(m.temperature) == pytest.approx(float(logged["val/temperature"]), rel=1e-6)
    assert float(m.odin_temperature) == float(logged["val/odin_temperature"]) and float(m.odin_temperature) in (1, 1000)
    assert float(m.odin_eps) == pytest.approx(float(logged["val/odin_eps"]))
    assert min(abs(float(m.odin_eps) - e) for e in (0, 0.002)) < 1e-6  # one of the searched, not a blend
    assert run.test_metrics["test/temperature"] == pytest.approx(float(m.temperature), rel=1e-6)


def test_the_checkpoint_holds_the_averaged_weights_with_those_values(run):
    saved, _ = load_checkpoint(run.run_dir / "checkpoints" / "last.ckpt")
    for name, value in run.model.state_dict().items():  # the model after fit = the average (on_train_end)
        # equal, bit for bit; nan where a buffer is never fitted (Mahalanobis' Gaussians: model.mahalanobis=false)
        torch.testing.assert_close(saved.state_dict()[name].cpu(), value.cpu(), rtol=0, atol=0, equal_nan=True,
                                   msg=name)


def test_weights_are_averaged(tmp_path):
    """The same run without the callback ends on other classifier weights: the average is used."""
    plain = train(["recipe=ood_digits_joint", f"run_dir={tmp_path}", "trainer.max_epochs=2", "callbacks=[]",
                   "test_after_fit=false", *SHORT])
    averaged = train(["recipe=ood_digits_joint", f"run_dir={tmp_path}/ema", "trainer.max_epochs=2",
                      "callbacks=[{name: ema, decay: 0.9}]", "test_after_fit=false", *SHORT])
    w = "classifier.head.weight"
    a, b = plain.model.state_dict(), averaged.model.state_dict()
    assert w in a and not torch.allclose(a[w], b[w])


def test_the_decay_warms_up():
    """decay 0.995, 190 updates towards 1 from 0: a fixed decay leaves the start 0.995^190 = 39 % of the
    average; the warm-up (as TensorFlow's num_updates) under 1 %."""
    from torch.optim.swa_utils import get_ema_avg_fn

    from zoo.callbacks.ema import warmup_ema

    def start_share(fn) -> float:
        avg = torch.zeros(())  # AveragedModel copies the first weights (n = 0), then averages them
        for n in range(1, 191):
            avg = fn(avg, torch.ones(()), torch.tensor(n))
        return 1 - float(avg)

    assert start_share(get_ema_avg_fn(0.995)) == pytest.approx(0.995 ** 190, abs=1e-4)  # 0.386
    assert start_share(warmup_ema(0.995)) < 0.01
