"""Unusual but legitimate environments: ``~`` and ``$VARIABLES`` in path options (quoted, or from a
recipe), another working directory, standard streams closed, full or read by a reader that left,
PYTHONWARNINGS=error, python -OO, text files with a byte-order mark or not in UTF-8. Each, unhandled, leaves a
folder named ``~`` in the working directory, a traceback, or a run stopped half-way."""

import os
import subprocess
import sys
from pathlib import Path

import lightning  # noqa: F401  (imported before the tests: its log handler keeps the real stderr)
import pytest
from platform_testlib import ROOT, enforced, run_main, subprocess_env

FAST = ["trainer.fast_dev_run=true"]


def zoo(argv: list[str], cwd: Path, env: dict | None = None, **streams) -> subprocess.CompletedProcess:
    streams = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **streams}
    return subprocess.run([sys.executable, "-m", *argv], cwd=cwd, env={**subprocess_env(), **(env or {})},
                          text=True, timeout=600, **streams)


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    lines = (proc.stderr or "").strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-3000:]
    return lines[0]


def only_child(folder: Path) -> Path:
    children = list(folder.iterdir())
    assert len(children) == 1, children
    return children[0]


@pytest.mark.slow
def test_home_and_variables_in_paths_from_another_folder_with_warnings_as_errors_and_a_reader_gone(tmp_path):
    """run_dir=~/runs and data.root=$DATA/x as written in a recipe or in quotes; the working folder is
    not the repository; PYTHONWARNINGS=error (the skip-gram loader's by-design warning is not raised);
    stdout is a pipe whose reader left (`| head -1`): the progress bar and the neighbour lines are
    dropped, the run goes on to its end."""
    home, data, cwd = tmp_path / "home", tmp_path / "data", tmp_path / "elsewhere"
    home.mkdir(), cwd.mkdir()
    read, write = os.pipe()
    os.close(read)
    try:
        proc = zoo(["zoo.train", "recipe=skipgram_synthetic", *FAST, "run_dir=~/runs", "data.root=$ZOO_TEST_DATA/x"],
                   cwd, {"HOME": str(home), "ZOO_TEST_DATA": str(data), "PYTHONWARNINGS": "error"}, stdout=write)
    finally:
        os.close(write)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (only_child(home / "runs" / "skipgram_synthetic") / "config.yaml").is_file()
    assert (data / "x").is_dir() and not list(cwd.iterdir())


@pytest.mark.slow
def test_frozen_encoder_runs_under_warnings_as_errors(tmp_path):
    """sat_shapes_hard keeps its frozen encoder in eval mode by design: Lightning's warning about it
    would end the run under PYTHONWARNINGS=error."""
    proc = zoo(["zoo.train", "recipe=sat_shapes_hard", *FAST, f"run_dir={tmp_path}/runs"], tmp_path,
               {"PYTHONWARNINGS": "error"})
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_a_warning_made_an_error_is_one_line_and_leaves_no_run_folder(tmp_path):
    """2 batches an epoch, logging every 50 steps: Lightning's warning, an exception under
    PYTHONWARNINGS=error, is one line, not a traceback inside fit with a half-written run folder."""
    proc = zoo(["zoo.train", "recipe=vae_digits", "trainer.max_epochs=1", "trainer.limit_train_batches=2",
                "trainer.enable_progress_bar=false", f"run_dir={tmp_path}/runs"], tmp_path, {"PYTHONWARNINGS": "error"})
    assert "logging interval" in one_error_line(proc) and "PYTHONWARNINGS" in one_error_line(proc)
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_closed_streams_and_a_full_stdout(tmp_path):
    """stdin, stdout and stderr closed (a cron job, `>&- 2>&-`): the progress bar would write to None and the
    run stop half-way. stdout on a full device: one line, exit status 2, not a traceback."""
    proc = subprocess.run(["sh", "-c", 'exec "$0" -m zoo.train recipe=vae_digits trainer.fast_dev_run=true '
                           '"run_dir=$1" <&- >&- 2>&-', sys.executable, str(tmp_path / "runs")],
                          cwd=tmp_path, env=subprocess_env(), timeout=600)
    assert proc.returncode == 0
    assert (only_child(tmp_path / "runs" / "vae_digits") / "plots").is_dir()  # written at the end of the run
    with open("/dev/full", "w") as full:
        proc = zoo(["zoo.pretrained"], tmp_path, stdout=full)
    assert "cannot write the standard output (no space left on device)" in one_error_line(proc)


def test_a_deleted_working_folder_and_python_OO(tmp_path):
    """A shell whose folder is deleted: one line, not a traceback (train) or MKL's fatal error
    (evaluate). python -OO strips the docstrings that evaluate, predict and estimators would build their
    --help from (an AttributeError on None)."""
    gone = tmp_path / "gone"
    gone.mkdir()
    env = {**subprocess_env(), "PYTHONPATH": str(ROOT)}  # no empty entry: Python cannot make "" absolute there
    for command in ("zoo.evaluate vae-digits", "zoo.estimators list"):  # estimators' package loads torch
        gone.mkdir(exist_ok=True)
        proc = subprocess.run(["sh", "-c", f'cd "$1" && rmdir "$1" && exec "$0" -m {command}', sys.executable,
                               str(gone)], env=env, capture_output=True, text=True, timeout=600)
        assert "current folder no longer exists" in one_error_line(proc)
    program = ("import sys, zoo.evaluate, zoo.predict, zoo.estimators.__main__ as estimators\n"
               "codes = [zoo.evaluate.main(['--help']), zoo.predict.main(['--help'])]\n"
               "try:\n    estimators.main(['--help'])\nexcept SystemExit as done:\n    codes.append(done.code)\n"
               "sys.exit(0 if codes == [0, 0, 0] and zoo.evaluate.__doc__ is None else 1)\n")  # -OO drops asserts
    proc = subprocess.run([sys.executable, "-OO", "-c", program], cwd=tmp_path, env=subprocess_env(),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_path_refusals(tmp_path, capsys, monkeypatch):
    """An unset $VARIABLE, ${HOME} (OmegaConf's syntax for a key), a path too long for the file system
    and a run_dir that is a symbolic link to nothing: one line each, before anything is built."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ZOO_TEST_UNSET", raising=False)
    code, err = run_main(["recipe=vae_digits", *FAST, "run_dir=$ZOO_TEST_UNSET/runs"], capsys)
    assert code == 2 and "$ZOO_TEST_UNSET in $ZOO_TEST_UNSET/runs is not set" in err
    code, err = run_main(["recipe=vae_digits", *FAST, "run_dir=${HOME}/runs"], capsys)
    assert code == 2 and "${oc.env:HOME}" in err
    code, err = run_main(["recipe=vae_digits", *FAST, f"run_dir={tmp_path}/{'n' * 300}"], capsys)
    assert code == 2 and "path too long" in err and "(a name may have 255)" in err
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")
    code, err = run_main(["recipe=vae_digits", *FAST, f"run_dir={tmp_path}/link"], capsys)
    assert code == 2 and "a symbolic link on its path leads to a folder that does not exist" in err
    assert f"\n  {tmp_path}/link -> {tmp_path}/nowhere" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link"]


def test_text_files_with_a_byte_order_mark_or_not_in_utf8(tmp_path, capsys):
    """A BOM must not glue itself to the first word, nor a Latin-1 corpus become words with U+FFFD without a word
    said; a Latin-1 similarity file is not a UnicodeDecodeError, and a Latin-1 recipe does not end --list."""
    import pytest

    from zoo.errors import UserError
    from zoo.models.skipgram.corpus import read_sentences
    from zoo.models.skipgram.evaluation import read_similarity
    from zoo.recipe_files import recipe_description

    bom = tmp_path / "bom.txt"
    bom.write_text("king queen\r\nman woman\r\n", encoding="utf-8-sig")
    assert list(read_sentences([bom])) == [["king", "queen"], ["man", "woman"]]
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("un café über\n".encode("latin-1") * 3)
    assert list(read_sentences([latin1]))[0] == ["un", "caf\ufffd", "\ufffdber"]
    assert f"warning: {latin1} is not all UTF-8 text (e.g. b'caf\\xe9')" in capsys.readouterr().err
    from zoo.models.seqgan.data import read_lines  # SeqGAN's sentences: the same rule

    seqgan_latin1 = tmp_path / "seqgan_latin1.txt"
    seqgan_latin1.write_bytes(b"\xef\xbb\xbf" + "un café sur la place du village\n".encode("latin-1") * 3)
    assert read_lines(seqgan_latin1, lowercase=True)[0] == "un caf\ufffd sur la place du village"  # no BOM on "un"
    assert f"warning: {seqgan_latin1} is not all UTF-8 text" in capsys.readouterr().err
    with pytest.raises(UserError, match="(?s)similarity file latin1.txt is not UTF-8 text .*iconv -f latin1"):
        read_similarity(latin1)
    recipe = tmp_path / "r.yaml"
    recipe.write_bytes("description: petit café\n".encode("latin-1"))
    assert recipe_description(recipe) == "petit caf\ufffd"
    recipe.write_text("description: très petit\n", encoding="utf-8-sig")
    assert recipe_description(recipe) == "très petit"


def test_a_figure_with_words_the_font_lacks_is_saved_under_warnings_as_errors(tmp_path):
    """matplotlib warns about every glyph its font lacks (a CJK word in a skip-gram plot): under
    PYTHONWARNINGS=error that would end the run after training."""
    import warnings

    import matplotlib
    import pytest

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from toymodel import Toy

    model = Toy({}, {"dim": 8})
    model.plots_dir = tmp_path / "plots"
    fig, ax = plt.subplots()
    ax.text(0.5, 0.5, "\u5b57 word")  # a CJK character DejaVu Sans has no glyph for
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert model.save_figure("words", fig) == tmp_path / "plots" / "words.png"
        with pytest.raises(UserWarning, match="missing from"):  # so the figure does need the filter
            fig2, ax2 = plt.subplots()
            ax2.text(0.5, 0.5, "\u5b57")
            fig2.savefig(tmp_path / "plain.png")
    assert (tmp_path / "plots" / "words.png").stat().st_size > 0


def test_many_cores_and_warnings_as_errors(tmp_path, monkeypatch, capsys):
    """On a machine of more than 2 cores Lightning warns that a DataLoader without workers "may be a
    bottleneck" (every recipe on the 16-core GPU machine: under PYTHONWARNINGS=error no run could
    start). The zoo's datamodules choose their workers, so the warning is dropped; here the core
    count Lightning sees is faked, the warnings filter is -W error."""
    import warnings

    from lightning.pytorch.trainer.connectors import data_connector

    monkeypatch.setattr(data_connector, "suggested_max_num_workers", lambda devices: 15)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        code, err = run_main(["recipe=vae_digits", "trainer.max_steps=2", "trainer.limit_val_batches=1",
                              "trainer.limit_test_batches=1", "trainer.enable_progress_bar=false",
                              f"run_dir={tmp_path}/runs"], capsys)
    assert code == 0, err


@pytest.mark.slow
@pytest.mark.parametrize("home", ["unset", "read-only"])
def test_wandb_and_matplotlib_without_a_writable_home(home, tmp_path):
    """HOME unset or read-only (a container, a cron job, a shared account): wandb's core would print about
    20 of its log lines ("ERROR main: failed to get logger path", "INFO server: ...") and leave
    .wandb_cache in the working folder, and matplotlib warn that it makes a temporary config folder.
    Their folders go into the run folder and a temporary folder, and the run says nothing of them."""
    env = {k: v for k, v in subprocess_env().items() if k not in ("HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME",
                                                                    "MPLCONFIGDIR")}
    if home == "read-only":
        (tmp_path / "home").mkdir(mode=0o555)
        env["HOME"] = str(tmp_path / "home")
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.run(enforced([sys.executable, "-m", "zoo.train", "recipe=vae_digits", "trainer.max_steps=2",
                                    "trainer.limit_val_batches=1", "trainer.limit_test_batches=1", "logger=wandb",
                                    "trainer.enable_progress_bar=false", f"run_dir={work}/runs"]),
                          cwd=work, env={**env, "WANDB_MODE": "offline"}, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert " INFO " not in proc.stderr and " ERROR " not in proc.stderr, proc.stderr[-3000:]
    assert "matplotlib" not in proc.stderr.replace(str(tmp_path), "").lower(), proc.stderr[-3000:]  # the test's name
    assert sorted(p.name for p in work.iterdir()) == ["runs"]
    run = only_child(work / "runs" / "vae_digits")
    assert list((run / "wandb").glob("offline-run-*")), "the offline run is where the docs say"
