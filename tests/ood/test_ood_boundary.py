"""mode=boundary_gan on the 2-D toy: against a classifier first trained with the confidence loss on
uniform noise and then frozen, the GAN with beta * KL(U || p(y|G(z))) puts its samples around the
two classes, in lower-confidence regions than the data (the paper's toy figure). A G on the data
(a plain GAN, or the joint recipe's: max-softmax and distance as the data's) fails the test."""

import lightning as L
import pytest
import torch

from zoo.errors import UserError
from zoo.models.ood.data import toy_points
from zoo.train import train

FAST = ["trainer.enable_progress_bar=false", "model.mahalanobis=false", "model.odin_temperatures=[1]",
        "model.odin_eps=[0]", "model.odin_every_n_epochs=1000", "checkpoint.every_n_epochs=1000",
        "model.plot_every_n_epochs=1000", "seed=0"]
MEANS = torch.tensor([[-2.0, 0.0], [2.0, 0.0]])  # the toy's class means


def _confidence_and_distance(model, x: torch.Tensor) -> tuple[float, float]:
    """Mean max-softmax of the classifier on x, and mean distance of x to the nearest class mean."""
    with torch.no_grad():
        msp = model.classifier(x).softmax(-1).max(-1).values.mean().item()
    return msp, torch.cdist(x, MEANS).min(-1).values.mean().item()


@pytest.mark.slow
def test_boundary_gan_samples_surround_the_data(tmp_path):
    # the recipe's 100 + 200 epochs shortened to 30 + 40 (about 6 s). Seed 0 measured: mean max-softmax
    # 0.852 on G's samples vs 0.910 on the data, distance to the nearest class mean 0.94 vs 0.63
    run = train(["recipe=ood_toy2d_boundary", f"run_dir={tmp_path}", *FAST,
                 "model.classifier_epochs=30", "trainer.max_epochs=70"])
    model = run.model.eval()
    assert (run.run_dir / "plots" / "confidence_map.png").is_file()
    x = toy_points(1000, 2.0, 0.5, seed=2)[0]  # the test split
    torch.manual_seed(0)
    with torch.no_grad():
        fake = model.generate(1000)
    data_msp, data_dist = _confidence_and_distance(model, x)
    fake_msp, fake_dist = _confidence_and_distance(model, fake)
    numbers = {"data": (data_msp, data_dist), "G": (fake_msp, fake_dist)}
    assert fake_msp < data_msp - 0.03, numbers  # G sits where the frozen classifier is less sure
    assert fake_dist > data_dist + 0.2, numbers  # ... further out than the data, not on it
    assert fake_dist < 2.0, numbers  # ... but near the classes (D keeps it there), not far off
    assert run.test_metrics["test/acc"] > 0.98
    assert run.test_metrics["test/box/msp/tnr95"] > 0.8  # the confidence-trained classifier


def test_boundary_gan_needs_an_ood_training_set_and_a_gan_stage(tmp_path):
    with pytest.raises(UserError, match="model.mode=boundary_gan needs an explicit OOD training set"):
        train(["recipe=ood_toy2d_boundary", f"run_dir={tmp_path}", *FAST, "data.ood_train=false"])
    with pytest.raises(UserError, match="set trainer.max_epochs above it"):
        train(["recipe=ood_toy2d_boundary", f"run_dir={tmp_path}", *FAST, "trainer.max_epochs=100"])


def test_confidence_map_and_reliability_bins_follow_float64():
    import torch
    from torch import nn

    from zoo.models.ood.detect import reliability_bins
    from zoo.models.ood.plots import confidence_map

    torch.manual_seed(0)
    classifier = nn.Linear(2, 3).double()
    fig = confidence_map(classifier, None, None, "joint")
    assert fig is not None
    probs = torch.rand(50, 3, dtype=torch.float64).softmax(-1)
    conf, acc, count = reliability_bins(probs, torch.randint(0, 3, (50,)))
    assert conf.dtype == acc.dtype == count.dtype == torch.float64 and int(count.sum()) == 50


def test_a_refused_boundary_run_prints_one_line_and_no_lightning_warning(tmp_path):
    """In a fresh process (warnings reach stderr there): Lightning's LeafSpec deprecation, raised by the
    CombinedLoader of the first training loader, came before the one error line."""
    import subprocess
    import sys

    from platform_testlib import subprocess_env

    p = subprocess.run([sys.executable, "-m", "zoo.train", "recipe=ood_toy2d_boundary", "trainer.max_epochs=3",
                        f"run_dir={tmp_path}/runs"], env=subprocess_env(), capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.strip().splitlines() == [p.stderr.strip()], p.stderr
    assert p.stderr.startswith("error: model.mode=boundary_gan trains G only after")
    assert not (tmp_path / "runs").exists()


class FrozenClassifierProbe(L.Callback):
    """Snapshots the classifier's state (weights and BatchNorm buffers) as the GAN stage starts and, after
    every GAN-stage step, records its mode, whether its parameters take gradients, and whether two calls
    on the same batch agree (dropout off)."""

    runs: list = []  # one probe per run, for the test to read

    def __init__(self):
        self.start, self.steps = None, []
        FrozenClassifierProbe.runs.append(self)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if pl_module.current_epoch == pl_module.cfg.classifier_epochs and self.start is None:
            self.start = {k: v.clone() for k, v in pl_module.classifier.state_dict().items()}

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if pl_module.current_epoch < pl_module.cfg.classifier_epochs:
            return
        c, x = pl_module.classifier, batch["in"][0]
        with torch.no_grad():
            same = torch.equal(c(x), c(x))
        self.steps.append((c.training, any(p.requires_grad for p in c.parameters()), same))


def test_boundary_gan_freezes_a_cnn_classifier_with_dropout_for_the_whole_gan_stage(tmp_path):
    """classifier=cnn (BatchNorm) with dropout 0.5, stage 1 for one epoch, then the GAN stage: epoch 1, and
    epoch 2 after a resume from last.ckpt (a freshly built module, in train mode). Every GAN-stage step sees
    the classifier in eval mode, without parameter gradients and deterministic, and its weights, running
    statistics and num_batches_tracked end exactly as stage 1 left them. (In train mode each G step's
    classifier(fake) moved running_mean and counted num_batches_tracked up, and dropout made it random.)"""
    FrozenClassifierProbe.runs.clear()
    args = ["recipe=ood_digits_ce", "model.mode=boundary_gan", "data.ood_train=true", "model.classifier=cnn",
            "model.dropout=0.5", "model.classifier_epochs=1", f"run_dir={tmp_path}", "trainer.limit_train_batches=3",
            "trainer.limit_val_batches=1", "trainer.limit_test_batches=1",
            "callbacks=[{name: 'test_ood_boundary:FrozenClassifierProbe'}]", *FAST]
    first = train([*args, "trainer.max_epochs=2", "test_after_fit=false"])
    probe = FrozenClassifierProbe.runs[-1]  # the one the trainer used (the recipe check builds one first)
    start = probe.start
    second = train([*args, "trainer.max_epochs=3", "ckpt_path=last"])
    assert second.run_dir == first.run_dir and second.model.current_epoch == 3
    steps = probe.steps + FrozenClassifierProbe.runs[-1].steps
    assert steps == [(False, False, True)] * 6, steps  # (training, requires_grad, two calls agree) a step
    end = second.model.classifier.state_dict()
    assert any("num_batches_tracked" in k for k in end)
    for k, v in start.items():
        assert torch.equal(end[k], v), k
