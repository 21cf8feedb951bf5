"""Lightning's start-up lines ("GPU available: ...", the model summary) are held back until training
or testing starts: a mistake Lightning finds inside fit or test before then is the one line printed,
and a run that starts prints them once, in order."""

import logging
import os
import signal
import warnings

import lightning as L  # imported before the tests: its log handler keeps the real stderr
import pytest
from platform_testlib import run_main

from zoo.tracking import HeldMessages


class Recorder(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def lightning_lines():
    """What reaches a handler on Lightning's logger, as the terminal would see it."""
    recorder = Recorder()
    logger = logging.getLogger("lightning.pytorch")
    logger.addHandler(recorder)
    yield recorder.lines
    logger.removeHandler(recorder)


def test_a_refusal_inside_fit_prints_no_lightning_line(tmp_path, capsys, lightning_lines):
    code, err = run_main(["recipe=vae_digits", f"run_dir={tmp_path}/runs", "trainer.max_steps=3",
                          "trainer.val_check_interval=1000", "trainer.enable_progress_bar=false"], capsys)
    assert code == 2 and err.startswith("error: trainer.val_check_interval"), err
    assert lightning_lines == [], lightning_lines  # the device lines and the model summary are dropped


def test_a_run_prints_the_start_up_lines_once_in_order(tmp_path, capsys, lightning_lines):
    code, err = run_main(["recipe=vae_digits", f"run_dir={tmp_path}/runs", "trainer.max_steps=2",
                          "trainer.limit_val_batches=1", "trainer.enable_progress_bar=false"], capsys)
    assert code == 0, err
    devices = [i for i, line in enumerate(lightning_lines) if line.startswith("GPU available")]
    summary = [i for i, line in enumerate(lightning_lines) if "Total params" in line]
    assert len(devices) == 1 and len(summary) == 1 and devices[0] < summary[0], lightning_lines


def test_evaluate_refusing_a_test_split_prints_no_lightning_line(capsys, lightning_lines):
    from zoo.evaluate import main

    code = main(["vae-digits", "trainer.limit_test_batches=0.0001", "data.eval_batch_size=1"])
    assert code == 2 and "limit_test_batches" in capsys.readouterr().err
    assert lightning_lines == [], lightning_lines
    assert main(["vae-digits", "trainer.limit_test_batches=1"]) == 0
    assert sum(line.startswith("GPU available") for line in lightning_lines) == 1, lightning_lines


def test_held_records_are_released_in_order_once_and_a_nested_hold_defers_to_the_outer(lightning_lines):
    log = logging.getLogger("lightning.pytorch.utilities.rank_zero")
    outer = HeldMessages().start()
    log.info("first")
    with HeldMessages():  # e.g. build_trainer's own hold inside zoo.train's
        log.info("second")
    assert lightning_lines == []  # the inner hold let out nothing: the outer one holds it all
    outer.release()
    assert lightning_lines == ["first", "second"]
    outer.release()  # a second release (on_test_start after on_train_start) prints nothing again
    log.info("third")
    assert lightning_lines == ["first", "second", "third"]  # released: not held


def test_a_discarded_hold_drops_its_records_and_holds_nothing_after(lightning_lines):
    log = logging.getLogger("lightning.pytorch.utilities.rank_zero")
    with pytest.raises(ValueError):
        with HeldMessages():
            log.info("GPU available: False, used: False")
            raise ValueError("a setting Lightning refused")
    assert lightning_lines == []
    log.info("after")
    assert lightning_lines == ["after"]


def test_records_of_a_logger_that_propagates_to_the_root_are_held_too(lightning_lines):
    recorder = Recorder()
    root, logger = logging.getLogger(), logging.getLogger("lightning.fabric.utilities.rank_zero")
    root.addHandler(recorder)
    fabric = logging.getLogger("lightning.fabric")
    saved = fabric.propagate
    fabric.propagate = True  # as when an application configured the root logger before importing Lightning
    try:
        with HeldMessages():
            logger.warning("held")
            assert recorder.lines == []
        assert recorder.lines == ["held"]
    finally:
        fabric.propagate = saved
        root.removeHandler(recorder)


def test_the_same_console_output_with_rich_installed(tmp_path, monkeypatch, lightning_lines):
    """With the ``rich`` package installed Lightning picks its rich model summary and progress bar,
    which print to the console directly (past the held messages; the summary came before the device
    line on the GPU machine, which has rich). zoo.train names the plain ones, so Lightning's flag
    that rich is there changes nothing (without them it would build the rich ones here, which have
    no rich to import)."""
    from lightning.pytorch.callbacks import ModelSummary, TQDMProgressBar
    from lightning.pytorch.trainer.connectors import callback_connector

    from zoo.train import train

    monkeypatch.setattr(callback_connector, "_RICH_AVAILABLE", True)
    monkeypatch.setenv("ZOO_PROGRESS", "bar")  # the progress bar, as on a terminal (else plain lines: no bar)
    result = train(["recipe=vae_digits", f"run_dir={tmp_path}/runs", "trainer.max_steps=2",
                    "trainer.limit_val_batches=1", "trainer.limit_test_batches=1"])
    kinds = [type(c) for c in result.model.trainer.callbacks]
    assert kinds.count(ModelSummary) == 1 and kinds.count(TQDMProgressBar) == 1, kinds
    assert not any("Rich" in k.__name__ for k in kinds), kinds
    assert sum("Total params" in line for line in lightning_lines) == 1, lightning_lines
    assert not any("already configured" in line for line in lightning_lines), lightning_lines  # nor its note on that


def test_matmul_precision_sets_both_switches_and_answers_lightnings_tip(tmp_path, capsys, monkeypatch):
    """``matmul_precision=highest``: matrix products and cuDNN convolutions in full float32 (torch keeps
    cuDNN's TF32 switch apart, on by default: on the H100 the conv net's meta-gradient moved by 2e-3);
    Lightning's tip to choose the precision, printed on every run on such a GPU, is then dropped."""
    import torch

    from zoo.tracking import _DropNoise

    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", True)
    monkeypatch.setattr(_DropNoise, "precision_chosen", False)
    tip = logging.LogRecord("lightning.pytorch.utilities.rank_zero", logging.INFO, __file__, 1,
                            "You are using a CUDA device that has Tensor Cores. To properly utilize them, you should "
                            "set `torch.set_float32_matmul_precision('medium' | 'high')`", None, None)
    assert _DropNoise().filter(tip)  # kept while the user has not chosen
    before = torch.get_float32_matmul_precision()
    try:
        code, err = run_main(["recipe=vae_digits", "matmul_precision=highest", "trainer.fast_dev_run=true",
                              f"run_dir={tmp_path}/runs"], capsys)
        assert code == 0, err
        assert torch.get_float32_matmul_precision() == "highest" and torch.backends.cudnn.allow_tf32 is False
        assert not _DropNoise().filter(tip)
        code, err = run_main(["recipe=vae_digits", "matmul_precision=high", "trainer.fast_dev_run=true",
                              f"run_dir={tmp_path}/runs"], capsys)
        assert code == 0 and torch.get_float32_matmul_precision() == "high" and torch.backends.cudnn.allow_tf32
        from zoo.evaluate import main as evaluate  # the same switch to reproduce a card on a GPU

        assert evaluate(["vae-digits", "matmul_precision=highest", "trainer.limit_test_batches=1"]) == 0
        assert torch.get_float32_matmul_precision() == "highest" and torch.backends.cudnn.allow_tf32 is False
        assert evaluate(["vae-digits", "matmul_precision=fast"]) == 2
        assert "must be one of [None, 'highest', 'high', 'medium'], got 'fast'" in capsys.readouterr().err
    finally:
        torch.set_float32_matmul_precision(before)


class CtrlC(L.Callback):
    """Presses Ctrl-C (SIGINT to this process) once the training step ``at`` is done."""

    def __init__(self, at: int = 2):
        self.at = at

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step == self.at:
            os.kill(os.getpid(), signal.SIGINT)


def train_warned(argv: list[str]) -> tuple[object, list[str]]:
    """``zoo.train.train(argv)``: its result and the warnings that reached the screen (those the zoo's filters let
    through)."""
    from zoo.train import train

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = train(argv)
    return result, [str(w.message) for w in caught]


def test_an_early_ctrl_c_gets_the_zoos_note_alone(toy_recipe, tmp_path, capsys):
    """Stopped before its first validation, a run has no val/ metric for its best checkpoint: the zoo's note says
    so, without Lightning's "could not find the monitored key ... HINT: Did you call log" beside it."""
    result, warned = train_warned([f"recipe={toy_recipe}", f"run_dir={tmp_path}", "test_after_fit=false",
                                   f"callbacks=[{{name: '{__name__}:CtrlC', at: 2}}]"])
    err = capsys.readouterr().err
    assert result.interrupted and (result.run_dir / "checkpoints" / "last.ckpt").is_file()
    assert "before its first validation, so no best checkpoint was chosen by val/loss" in err, err
    assert not [w for w in warned if "monitored key" in w], warned


def test_a_resumed_run_is_not_warned_of_its_own_checkpoint_folder(toy_recipe, tmp_path, monkeypatch):
    common = [f"recipe={toy_recipe}", f"run_dir={tmp_path}", "test_after_fit=false"]
    first, _ = train_warned([*common, "trainer.max_epochs=1"])
    _, warned = train_warned([*common, "trainer.max_epochs=2", "ckpt_path=last"])
    assert not [w for w in warned if "exists and is not empty" in w], warned
    monkeypatch.setenv("ZOO_RUN_DIR", str(first.run_dir))  # a fresh run into that folder: a clash, still said
    _, warned = train_warned([*common, "trainer.max_epochs=1"])
    assert [w for w in warned if "exists and is not empty" in w], warned
