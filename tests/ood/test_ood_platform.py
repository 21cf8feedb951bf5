"""The OOD model on the platform's run machinery: resume (three optimizers, the calibration / ODIN
buffers) and CPU DDP with gloo (manual optimisation, three backward passes a step, gathered scores)."""

import subprocess
import sys
from pathlib import Path

from platform_testlib import subprocess_env  # tests/platform, on sys.path via conftest

from zoo.train import train

ROOT = Path(__file__).resolve().parents[2]
SHORT = ["trainer.limit_train_batches=3", "trainer.limit_val_batches=1", "trainer.limit_test_batches=1",
         "trainer.enable_progress_bar=false", "model.odin_temperatures=[1000]", "model.odin_eps=[0]",
         "model.mahalanobis=false"]


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


def test_joint_run_under_cpu_ddp(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "zoo.train", "recipe=ood_digits_joint", f"run_dir={tmp_path}",
                           "trainer.accelerator=cpu", "trainer.devices=2", "trainer.strategy=ddp",
                           "trainer.max_epochs=1", *SHORT],
                          env=subprocess_env(), capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("run folder:") == 1
    assert "test/uniform/odin/auroc" in proc.stdout
    assert len(list((tmp_path / "ood_digits_joint").iterdir())) == 1
