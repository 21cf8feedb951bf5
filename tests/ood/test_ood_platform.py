"""The OOD model on the platform's run machinery: resume (three optimizers, the calibration / ODIN
buffers) and CPU DDP with gloo (manual optimisation, three backward passes a step, gathered scores),
compared with one process."""

import subprocess
import sys
from pathlib import Path

import pytest
from platform_testlib import subprocess_env  # tests/platform, on sys.path via conftest

from zoo.train import train

ROOT = Path(__file__).resolve().parents[2]
SHORT = ["trainer.limit_train_batches=3", "trainer.limit_val_batches=1", "trainer.limit_test_batches=1",
         "trainer.enable_progress_bar=false", "model.odin_temperatures=[1000]", "model.odin_eps=[0]",
         "model.mahalanobis=false"]


@pytest.mark.slow
def test_joint_run_resumes_from_its_last_checkpoint(tmp_path):
    first = train(["recipe=ood_digits_joint", f"run_dir={tmp_path}", "trainer.max_epochs=1", *SHORT])
    temperature = float(first.model.temperature)
    assert temperature != 1.0  # fitted on validation, kept in a buffer
    second = train(["recipe=ood_digits_joint", f"run_dir={tmp_path}", "trainer.max_epochs=2", "ckpt_path=last",
                    *SHORT])
    assert second.run_dir == first.run_dir and second.model.current_epoch == 2
    trainer = second.model.trainer
    assert len(trainer.optimizers) == 3
    assert all(opt.state for opt in trainer.optimizers)  # Adam moments restored and stepped
    assert "test/photos/msp/tnr95" in second.test_metrics


@pytest.mark.slow
def test_joint_run_under_cpu_ddp_tests_like_one_process(tmp_path):
    """The digits joint recipe on 2 gloo processes (3 optimizers, manual optimisation): its test metrics,
    from the ranks' gathered scores (180 test images a rank, every set), equal those of one process
    evaluating the same checkpoint (zoo.evaluate: all 360 on one device), to 1e-6."""
    import json

    from zoo.evaluate import evaluate

    proc = subprocess.run([sys.executable, "-m", "zoo.train", "recipe=ood_digits_joint", f"run_dir={tmp_path}",
                           "trainer.accelerator=cpu", "trainer.devices=2", "trainer.strategy=ddp",
                           "trainer.max_epochs=1", *SHORT],
                          env=subprocess_env(), capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("run folder:") == 1
    (run_dir,) = (tmp_path / "ood_digits_joint").iterdir()
    ddp = json.loads((run_dir / "metrics.json").read_text())
    one = evaluate(str(run_dir / "checkpoints" / "last.ckpt"))
    assert "test/uniform/odin/auroc" in ddp and ddp.keys() == one.keys()
    for key in ddp:
        assert abs(ddp[key] - one[key]) < 1e-6, (key, ddp[key], one[key])


@pytest.mark.slow
def test_two_cpu_processes_train_the_classifier_like_one_process(tmp_path):
    """The 2-D toy's joint mode, full batches (2 processes x 32 points = 1 process x 64, 3 epochs), beta = 0
    so that the classifier's gradient does not depend on G's noise (each rank draws its own z): the classifier
    ends with the weights of the one-process run, to 1e-5, while the D and G steps, the three optimizers and
    the all-reduce of manual optimisation run between its steps. (G and D differ: other noise.)"""
    import torch

    common = ["recipe=ood_toy2d", "data.n_train=64", "model.beta=0", "trainer.max_epochs=3", "test_after_fit=false",
              "model.mahalanobis=false", "model.odin_temperatures=[1]", "model.odin_eps=[0]",
              "trainer.enable_progress_bar=false", "trainer.accelerator=cpu"]
    train([*common, f"run_dir={tmp_path}/one", "data.batch_size=64"])
    proc = subprocess.run([sys.executable, "-m", "zoo.train", *common, f"run_dir={tmp_path}/two",
                           "data.batch_size=32", "trainer.devices=2", "trainer.strategy=ddp"],
                          env=subprocess_env(), capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    a, b = (torch.load(next((tmp_path / d).glob("*/*/checkpoints/last.ckpt")), weights_only=True)["state_dict"]
            for d in ("one", "two"))
    classifier = [k for k in a if k.startswith("classifier.")]
    assert classifier
    for key in classifier:
        assert torch.allclose(a[key], b[key], atol=1e-5), key
    assert any(not torch.allclose(a[k], b[k], atol=1e-5) for k in a if k.startswith("generator."))
