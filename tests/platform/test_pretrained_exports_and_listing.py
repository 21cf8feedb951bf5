"""``python -m zoo.pretrained``: the listing shows each entry's headline metrics (the rest with --all, --json), and
``export`` writes into ./pretrained/ of the working folder (or --out), never into the package, where ``zoo.load``,
``zoo.list_pretrained`` and the listing find the entry by name after the released ones."""

import json

from platform_testlib import released_checkpoint

import zoo
from zoo.loading import PRETRAINED_DIR, pretrained_cards
from zoo.pretrained.__main__ import main


def test_the_listing_shows_headlines_and_all_metrics_on_demand(capsys):
    assert main([]) == 0
    short = capsys.readouterr().out
    assert main(["--all"]) == 0
    every = capsys.readouterr().out
    assert main(["--json"]) == 0
    cards = json.loads(capsys.readouterr().out)
    assert set(cards) == set(pretrained_cards())
    ood = cards["ood-digits-ce"]
    assert len(ood["metrics"]) > 80 and ood["headline"] == ["test/acc", "test/uniform/msp/tnr95"]
    metric_lines = [line for line in short.splitlines() if line.startswith("    test: ")]
    assert len(metric_lines) == len(cards) and max(map(len, metric_lines)) < 150, short  # ~90 on one OOD line
    assert "test/uniform/msp/tnr95=" in short and "test/photos/odin/tnr95" not in short
    assert "more: --all" in short and "test/photos/odin/tnr95=" in every
    for name, entry in cards.items():  # every released entry has a headline of its own metrics
        assert entry["headline"] and set(entry["headline"]) <= set(entry["metrics"]), name


def test_export_writes_into_the_working_folder_where_load_finds_it(tmp_path, monkeypatch, capsys):
    ckpt = released_checkpoint(tmp_path / "last.ckpt")
    monkeypatch.chdir(tmp_path)
    released = sorted(p.name for p in PRETRAINED_DIR.iterdir())
    (tmp_path / "pretrained").mkdir()
    (tmp_path / "pretrained" / "other-tool.json").write_text('{"name": "not a card"}')  # passed over
    assert main(["export", ckpt, "--name", "mine", "--description", "my dvae", "trainer.limit_test_batches=1"]) == 0
    assert "pretrained/mine.safetensors" in capsys.readouterr().out
    assert sorted(p.name for p in PRETRAINED_DIR.iterdir()) == released  # nothing written into the package
    assert (tmp_path / "pretrained" / "mine.json").is_file()
    assert zoo.list_pretrained()["mine"] == "my dvae"
    assert type(zoo.load("mine")).__name__ == type(zoo.load("dvae-digits")).__name__
    assert main([]) == 0
    assert "mine  [dvae, recipe dvae_digits" in capsys.readouterr().out

    out = tmp_path / "elsewhere"
    assert main(["export", ckpt, "--name", "other", "--out", str(out), "trainer.limit_test_batches=1"]) == 0
    assert (out / "other.safetensors").is_file() and "other" not in zoo.list_pretrained()
