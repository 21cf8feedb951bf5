"""model.encoder_from: a captioner starts from another captioning model's encoder weights (the
paper's encoder is a fixed pretrained CNN); mistakes are refused before a run folder exists."""

import pytest
import torch

from zoo.loading import load_checkpoint
from zoo.train import main, train

TINY = ["model.feat_dim=32", "model.cnn_width=8", "model.embed_dim=32", "model.hidden_dim=64", "model.att_dim=32",
        "data.n_train=32", "data.n_val=8", "data.n_test=8", "data.batch_size=16", "trainer.max_epochs=1",
        "test_after_fit=false", "trainer.enable_progress_bar=false", "callbacks=[]"]


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A tiny soft-attention run's last.ckpt: the encoder to start from."""
    run = train(["recipe=sat_shapes_soft", f"run_dir={tmp_path_factory.mktemp('src')}", "seed=1", *TINY])
    return run.run_dir / "checkpoints" / "last.ckpt"


def _encoder(ckpt):
    return {k: v.clone() for k, v in load_checkpoint(ckpt)[0].encoder.state_dict().items()}


def test_a_frozen_encoder_from_another_run_is_used_and_kept(source, tmp_path):
    wanted = _encoder(source)
    run = train(["recipe=sat_shapes_hard_scratch", f"run_dir={tmp_path}", f"model.encoder_from={source}",
                 "model.freeze_encoder=true", *TINY])
    trained = run.model.encoder.state_dict()
    for key, value in wanted.items():  # weights and BatchNorm statistics: unchanged by a frozen encoder
        assert torch.equal(trained[key].cpu(), value), key
    assert run.model.global_step > 0
    # the trained model is loaded from its own weights: the source is not read again
    ckpt = run.run_dir / "checkpoints" / "last.ckpt"
    moved = tmp_path / "elsewhere.ckpt"
    source.rename(moved)
    try:
        loaded, _ = load_checkpoint(ckpt)
        assert torch.equal(loaded.encoder.state_dict()["net.0.weight"], wanted["net.0.weight"])
    finally:
        moved.rename(source)


def test_a_resumed_run_does_not_read_the_source_again(source, tmp_path):
    """The checkpoint holds the copied encoder: resuming needs neither the source nor its reading."""
    wanted = _encoder(source)
    first = train(["recipe=sat_shapes_hard_scratch", f"run_dir={tmp_path}", f"model.encoder_from={source}",
                   "model.freeze_encoder=true", *TINY])
    moved = tmp_path / "elsewhere.ckpt"
    source.rename(moved)
    try:
        resumed = train(["recipe=sat_shapes_hard_scratch", f"run_dir={tmp_path}", f"model.encoder_from={source}",
                         "model.freeze_encoder=true", *TINY, "trainer.max_epochs=2",
                         f"ckpt_path={first.run_dir / 'checkpoints' / 'last.ckpt'}"])
    finally:
        moved.rename(source)
    assert resumed.model.current_epoch == 2 > first.model.current_epoch
    assert all(torch.equal(resumed.model.encoder.state_dict()[k].cpu(), v) for k, v in wanted.items())


def test_an_encoder_from_that_is_fine_tuned_starts_from_the_source(source, tmp_path):
    wanted = _encoder(source)
    fresh = train(["recipe=sat_shapes_hard_scratch", f"run_dir={tmp_path}/fresh", "trainer.max_steps=1", *TINY])
    tuned = train(["recipe=sat_shapes_hard_scratch", f"run_dir={tmp_path}/tuned", f"model.encoder_from={source}",
                   "trainer.max_steps=1", "model.lr=1e-9", *TINY])
    w = "net.0.weight"
    # one step at lr 1e-9 leaves the copied weights where they were; without encoder_from they differ
    assert torch.allclose(tuned.model.encoder.state_dict()[w].cpu(), wanted[w], atol=1e-6)
    assert not torch.allclose(fresh.model.encoder.state_dict()[w].cpu(), wanted[w], atol=1e-3)


@pytest.mark.parametrize("target, extra, expected", [
    ("vae-digits", [], "is a 'vae' model, not a captioning one"),
    ("sat-shapes-sof", [], "model.encoder_from: unknown pretrained model 'sat-shapes-sof'"),
    ("sat-shapes-soft", [], "does not fit this model's"),  # TINY's widths against the card's
    ("/nope/x.ckpt", [], "model.encoder_from: checkpoint not found"),
    ("''", [], "encoder_from must be a captioning checkpoint or pretrained name"),  # trained a random frozen CNN
])
def test_a_wrong_encoder_from_is_refused_before_the_run_folder(target, extra, expected, tmp_path, capsys):
    code = main(["recipe=sat_shapes_hard", f"run_dir={tmp_path}/runs", f"model.encoder_from={target}", *TINY, *extra])
    err = capsys.readouterr().err
    assert code == 2 and expected in err and "Traceback" not in err, err
    assert not (tmp_path / "runs").exists()


def test_the_hard_recipe_starts_from_the_soft_cards_encoder_and_keeps_it(tmp_path):
    from zoo.loading import load

    wanted = load("sat-shapes-soft").encoder.state_dict()
    run = train(["recipe=sat_shapes_hard", f"run_dir={tmp_path}", "data.n_train=32", "data.n_val=8", "data.n_test=8",
                 "data.batch_size=16", "trainer.max_steps=3", "test_after_fit=false",
                 "trainer.enable_progress_bar=false"])
    trained = run.model.encoder.state_dict()
    assert run.model.global_step == 3 and wanted.keys() == trained.keys()
    assert all(torch.equal(trained[k].cpu(), v) for k, v in wanted.items())


@pytest.mark.parametrize("extra, warned", [
    (["model.encoder_from=null", "model.freeze_encoder=true"], True),  # a random CNN kept fixed: likely a slip
    (["model.encoder_from=null", "model.freeze_encoder=false"], False),
])
def test_a_frozen_random_encoder_is_warned_about(extra, warned, tmp_path, capsys):
    run = train(["recipe=sat_shapes_hard", f"run_dir={tmp_path}", *TINY, "trainer.max_steps=1", *extra])
    assert run.model.global_step == 1  # allowed: random features are a baseline
    err = capsys.readouterr().err
    assert ("encoder stays at its random initialisation" in err) is warned, err
