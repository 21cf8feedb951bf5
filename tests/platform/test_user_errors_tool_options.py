"""User mistakes in the tools' options: ``zoo.predict`` options (seeds, sizes, beams,
export paths), ``zoo.estimators compare``, ``zoo.pretrained export --name``, a card's path given for
a model, and skip-gram's end-of-training plot. One message, exit status 2, no traceback, nothing
written (more cases: test_user_errors_tools.py)."""

import dataclasses
from typing import Optional

import lightning  # noqa: F401  (imported here, not first inside a test: its log handler keeps the real stderr)
import pytest
import torch
from platform_testlib import one_message

from zoo import evaluate, predict
from zoo.config import SEED_MAX
from zoo.errors import UserError
from zoo.schema import validate

HUGE = "99999999999999999999999"  # ValueError: Overflow when unpacking long long (torch's manual_seed)


def one_error_line(capsys) -> str:
    """The command's one message: its ``error:`` line and that error's details below it."""
    err = capsys.readouterr().err
    assert one_message(err) and "Traceback" not in err, err
    return err.strip()


@pytest.fixture
def image(tmp_path):
    from PIL import Image

    path = tmp_path / "in" / "shape.png"
    path.parent.mkdir()
    Image.new("RGB", (64, 64), (200, 30, 30)).save(path)
    return path


def written(tmp_path) -> list:
    """Files under tmp_path besides the input image."""
    return [p for p in tmp_path.rglob("*") if p.is_file() and p.parent.name != "in"]


@pytest.mark.parametrize("argv", [
    ["vae-digits", "n=4", "out=OUT/s.png", f"seed={HUGE}"],  # vae/common.py
    ["seqgan-oracle-small", "n=2", f"seed={HUGE}"],  # seqgan/evaluation.py, sampling
    ["seqgan-oracle-small", "method=sbs", "k=2", "seed=18446744073709551616"],  # and stochastic beam search
    ["maml-sinusoid", "out=OUT/m.png", f"seed={HUGE}"],  # maml/plots.py
    ["sat-shapes-soft", "IMAGE", "sbs=3", f"seed={HUGE}"],  # captioning/predict.py
    ["vae-digits", "n=4", "out=OUT/s.png", f"seed={SEED_MAX + 1}"],  # numpy's limit, not only torch's
    ["vae-digits", "n=4", "out=OUT/s.png", "seed=1.5"],
])
def test_predict_seeds_out_of_range(argv, image, tmp_path, capsys):
    argv = [a.replace("OUT", str(tmp_path)).replace("IMAGE", str(image)) for a in argv]
    assert predict.main(argv) == 2
    line = one_error_line(capsys)
    assert "'seed'" in line and f"integer from 0 to {SEED_MAX}" in line, line
    assert not written(tmp_path)


@dataclasses.dataclass
class SeedOptions:
    seed: int = 0  # a seed
    init_seed: Optional[int] = None  # another one
    n: int = 1  # a count


def test_option_seeds():
    assert validate(SeedOptions, {"seed": SEED_MAX, "init_seed": 7}, "x", what="option")["seed"] == SEED_MAX
    for key, value in [("seed", SEED_MAX + 1), ("init_seed", 2**70), ("init_seed", -1)]:
        with pytest.raises(UserError, match=f"'{key}' in x must be an integer from 0 to {SEED_MAX}"):
            validate(SeedOptions, {key: value}, "x", what="option")
    for key, value in [("init_seed", True), ("init_seed", "3x")]:
        with pytest.raises(UserError, match=f"'{key}' in x"):
            validate(SeedOptions, {key: value}, "x", what="option")
    assert validate(SeedOptions, {"n": 2**31 - 1}, "x", what="option")["n"] == 2**31 - 1  # a count: no seed range


@pytest.mark.parametrize("args, expected", [
    (["--seed", HUGE], f"--seed must be an integer from 0 to {SEED_MAX}"),  # else an overflow in compare.run
    (["--seed", "-1"], f"--seed must be an integer from 0 to {SEED_MAX}"),
    (["--draws", "100000000000"], "--draws must be at most 1000000"),  # not "can't allocate memory"
])
def test_estimators_compare_seed_and_draws(args, expected, tmp_path, capsys, monkeypatch):
    from zoo.estimators.__main__ import main as estimators_main

    monkeypatch.chdir(tmp_path)  # where the default --out would be written
    assert estimators_main(["compare", *args]) == 2
    line = one_error_line(capsys)
    assert expected in line, line
    assert not any(tmp_path.iterdir())


def test_estimators_compare_out_of_memory_is_a_message(tmp_path, capsys, monkeypatch):
    from zoo.estimators import compare
    from zoo.estimators.__main__ import main as estimators_main

    def no_memory(**kwargs):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate memory: "
                           "you tried to allocate 400000000000 bytes. Error code 12 (Cannot allocate memory)")

    monkeypatch.setattr(compare, "run", no_memory)
    monkeypatch.chdir(tmp_path)
    assert estimators_main(["compare", "--draws", "1000"]) == 2
    line = one_error_line(capsys)
    assert "out of memory" in line, line
    assert not any(tmp_path.iterdir())


def test_estimators_compare_help_names_the_bounds(capsys):
    from zoo.estimators.__main__ import main as estimators_main

    with pytest.raises(SystemExit):
        estimators_main(["compare", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "2 to 10**6" in out and f"0 to {SEED_MAX}" in out, out


@pytest.mark.parametrize("argv, expected", [
    (["maml-sinusoid", "shots=100000000", "out=OUT/m.png"],  # else out of memory
     "'shots' in maml predict must be <= 10000 (points of the random task; 0 = the model's K), got 100000000"),
    (["maml-sinusoid", "steps=1000000000", "out=OUT/m.png"], "'steps' in maml predict must be <= 10000"),
    # with points given, shots= and seed= would be ignored without a word
    (["maml-sinusoid", "1,2", "shots=3", "out=OUT/m.png"],
     "shots= chooses the random task; with points given, the points are the task: leave it out"),
    (["maml-sinusoid", "1,2", "shots=3", "seed=1", "out=OUT/m.png"], "shots= and seed= choose the random task"),
    (["sat-shapes-soft", "IMAGE", "beam=100000"], "option beam must be at most 25"),  # else decodes for minutes
    (["sat-shapes-soft", "IMAGE", "sbs=100000"], "option sbs must be at most 25"),
    (["sat-shapes-soft", "IMAGE", "max_len=10000000"], "'max_len' in the captioning model (sat) must be <= 1000"),
])
def test_predict_sizes_are_bounded(argv, expected, image, tmp_path, capsys):
    argv = [a.replace("OUT", str(tmp_path)).replace("IMAGE", str(image)) for a in argv]
    assert predict.main(argv) == 2
    line = one_error_line(capsys)
    assert expected in line, line
    assert not written(tmp_path)


def test_skipgram_export_path_and_binary(tmp_path, capsys):
    folder = tmp_path / "out"
    folder.mkdir()
    (tmp_path / "file").write_text("x")
    cases = [([f"export={folder}"], f"export={folder} is a folder; give a file name"),  # not an IsADirectoryError
             ([f"export={tmp_path / 'file' / 'v.bin'}"], "is a file, not a folder"),
             ([f"export={tmp_path / 'v.txt'}", "binary=maybe"], "'binary' in skipgram: must be true or false"),
             (["w0", "binary=maybe"], "'binary' in skipgram: must be true or false")]
    for options, expected in cases:
        assert predict.main(["skipgram-synthetic", *options]) == 2
        err = capsys.readouterr()
        assert expected in err.err and len(err.err.strip().splitlines()) == 1 and not err.out, err
    assert not any(folder.iterdir()) and sorted(p.name for p in tmp_path.iterdir()) == ["file", "out"]
    assert predict.main(["skipgram-synthetic", f"export={tmp_path / 'new' / 'v.txt'}", "binary=false"]) == 0
    assert (tmp_path / "new" / "v.txt").read_text().split("\n", 1)[0].count(" ") == 1  # a text header "V D"
    capsys.readouterr()


def test_skipgram_plot_with_fewer_than_two_components():
    from zoo.models.skipgram.plots import embedding_map

    for vectors in (torch.randn(10, 1), torch.randn(1, 5), torch.randn(1, 1)):  # dim=1, one word, both
        fig = embedding_map(vectors, [f"w{i}" for i in range(len(vectors))])
        assert len(fig.axes[0].collections[0].get_offsets()) == len(vectors)


@pytest.mark.slow
def test_skipgram_trains_with_dim_1(tmp_path, capsys):
    from zoo.train import main

    assert main(["recipe=skipgram_synthetic", f"run_dir={tmp_path}/runs", "trainer.fast_dev_run=true",
                 "model.dim=1"]) == 0  # not an IndexError in the end-of-training plot
    assert len(list((tmp_path / "runs").glob("*/*/plots/embedding_pca.png"))) == 1
    capsys.readouterr()


def test_skipgram_refuses_a_one_word_corpus(tmp_path, capsys):
    from zoo.models.skipgram.module import SkipGramModule
    from zoo.train import main

    with pytest.raises(UserError, match="needs at least 2 distinct words"):
        SkipGramModule({"dim": 4}, {"vocab": ["hello"], "counts": [500], "window": 2, "train_words": 500})
    corpus = tmp_path / "hello.txt"
    corpus.write_text("hello\n" * 500)  # else loss 0, then an IndexError in the plot
    code = main(["recipe=skipgram_lee", f"data.files={corpus}", "data.min_count=1", f"data.root={tmp_path}/sg",
                 "trainer.fast_dev_run=true", f"run_dir={tmp_path}/runs"])
    line = one_error_line(capsys)
    assert code == 2 and "the corpus has 1 word type after min_count (hello)" in line, line
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("name", ["vae.ckpt", "vae.safetensors", "vae.JSON", "a\\b"])
def test_export_refuses_a_name_read_as_a_file_path(name, tmp_path, capsys):
    # vae.ckpt would write vae.ckpt.json + .safetensors, which `zoo.predict vae.ckpt` takes for a missing checkpoint
    from zoo.loading import PRETRAINED_DIR
    from zoo.pretrained.__main__ import main as pretrained_main

    before = sorted(PRETRAINED_DIR.iterdir())
    assert pretrained_main(["export", str(tmp_path / "missing.ckpt"), "--name", name]) == 2  # the name first
    line = one_error_line(capsys)
    assert f"--name {name!r} cannot name an entry" in line, line
    assert sorted(PRETRAINED_DIR.iterdir()) == before


def test_a_pretrained_cards_path_names_the_entry(tmp_path, capsys):
    from zoo.loading import PRETRAINED_DIR

    for path in (PRETRAINED_DIR / "vae-digits.json", PRETRAINED_DIR / "vae-digits.safetensors"):
        assert evaluate.main([str(path)]) == 2  # not "no such file": the file exists
        line = one_error_line(capsys)
        assert f"{path} is the pretrained" in line and "give its name, vae-digits" in line, line
    other = tmp_path / "notes.json"
    other.write_text("{}")
    assert predict.main([str(other)]) == 2
    line = one_error_line(capsys)
    assert "is not a checkpoint nor a pretrained entry" in line and "vae-digits" in line, line
