"""Files the user may not read and folders they may not write in: one 'error:' line that names the
path and the chmod that fixes it, exit status 2, no traceback, nothing left behind. Was a
PermissionError traceback from whichever reader met the file first (omegaconf, torch.load, PIL, a
DataLoader worker during training), or a message blaming the file's contents ("not a valid IDX
file: download it again"), or "holds no images" for a folder that could not be listed.

The commands run as subprocesses with the permissions enforced: as root, chmod alone stops nothing,
so root's override capabilities are dropped with setpriv (util-linux)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from platform_testlib import ROOT, subprocess_env

DROP = "-dac_override,-dac_read_search"


def enforced(argv: list[str]) -> list[str]:
    """``argv`` run so that file permissions apply: as root, under setpriv without the capabilities
    that bypass them; as another user, as it is."""
    if os.geteuid() != 0:
        return argv
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.fail("these tests run as root, where chmod stops no read: they need setpriv (util-linux, "
                    "e.g. apt-get install util-linux) to drop CAP_DAC_OVERRIDE; it is not installed")
    return [setpriv, f"--inh-caps={DROP}", f"--bounding-set={DROP}", *argv]


def zoo(module: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(enforced([sys.executable, "-m", f"zoo.{module}", *map(str, args)]), cwd=cwd,
                          env=subprocess_env(), capture_output=True, text=True, timeout=300)


@pytest.fixture
def lock():
    """``lock(path, mode)`` chmods ``path``; every mode is restored at teardown (so pytest can delete
    tmp_path)."""
    changed: list[tuple[Path, int]] = []

    def chmod(path: Path, mode: int = 0o000) -> Path:
        changed.append((path, path.stat().st_mode & 0o7777))
        os.chmod(path, mode)
        return path

    yield chmod
    for path, mode in reversed(changed):
        os.chmod(path, mode)


def assert_refused(result: subprocess.CompletedProcess, path: Path, runs: Path | None = None) -> str:
    err = result.stderr
    assert result.returncode == 2 and "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: ") and str(path) in last and "chmod" in last, err
    assert runs is None or not runs.exists() or not any(runs.iterdir()), "nothing written for a refused run"
    return last


def test_an_unreadable_recipe(tmp_path, lock):
    recipe = tmp_path / "secret.yaml"
    shutil.copy(ROOT / "recipes" / "vae" / "vae_digits.yaml", recipe)
    lock(recipe)
    last = assert_refused(zoo("train", f"recipe={recipe}", f"run_dir={tmp_path / 'runs'}", cwd=tmp_path), recipe,
                          tmp_path / "runs")
    assert f"chmod +r {recipe}" in last


def test_resuming_from_an_unreadable_last_checkpoint_writes_nothing(tmp_path, lock):
    run = tmp_path / "runs" / "vae_digits" / "20240101-000000"
    (run / "checkpoints").mkdir(parents=True)
    ckpt = run / "checkpoints" / "last.ckpt"
    ckpt.write_bytes(b"PK")
    lock(ckpt)
    before = sorted(tmp_path.rglob("*"))
    result = zoo("train", "recipe=vae_digits", f"run_dir={tmp_path / 'runs'}", "ckpt_path=last", cwd=tmp_path)
    assert_refused(result, ckpt)
    assert sorted(tmp_path.rglob("*")) == before


def test_resuming_the_last_run_whose_checkpoints_folder_is_closed_names_the_folder(tmp_path, lock):
    folder = tmp_path / "runs" / "vae_digits" / "20240101-000000" / "checkpoints"
    folder.mkdir(parents=True)
    (folder / "last.ckpt").write_bytes(b"PK")
    lock(folder)  # the glob for */checkpoints/last.ckpt passed over it: "no earlier run" before
    result = zoo("train", "recipe=vae_digits", f"run_dir={tmp_path / 'runs'}", "ckpt_path=last", cwd=tmp_path)
    last = assert_refused(result, folder)
    assert f"chmod +rx {folder}" in last and "no earlier run" not in last


def test_reconstructions_beside_inputs_in_a_closed_folder_are_refused_before_any_is_written(tmp_path, lock):
    from PIL import Image

    mine, closed = tmp_path / "mine", tmp_path / "read-only"
    for folder in (mine, closed):
        folder.mkdir()
        Image.new("L", (8, 8), 0).save(folder / "digit.png")
    lock(closed, 0o500)
    result = zoo("predict", "vae-digits", mine / "digit.png", closed / "digit.png", cwd=tmp_path)
    assert_refused(result, closed)
    assert sorted(p.name for p in mine.iterdir()) == ["digit.png"]  # the first input's was not written either


@pytest.mark.parametrize("module", ["evaluate", "predict"])
def test_an_unreadable_checkpoint(module, tmp_path, lock):
    ckpt = tmp_path / "model.ckpt"
    ckpt.write_bytes(b"PK")  # never opened: what it holds does not matter
    lock(ckpt)
    assert_refused(zoo(module, ckpt, cwd=tmp_path), ckpt)


def test_an_output_in_a_folder_that_may_not_be_written(tmp_path, lock):
    folder = tmp_path / "read-only"
    folder.mkdir()
    lock(folder, 0o500)
    last = assert_refused(zoo("predict", "vae-digits", f"out={folder / 'samples.png'}", "n=4", cwd=tmp_path), folder)
    assert "out=" in last and not any(folder.iterdir())


def test_evaluate_refuses_a_plots_dir_it_may_not_make(tmp_path, lock):
    folder = tmp_path / "read-only"
    folder.mkdir()
    lock(folder, 0o500)
    last = assert_refused(zoo("evaluate", "vae-digits", f"plots_dir={folder / 'plots'}", cwd=tmp_path), folder)
    assert "plots_dir=" in last


# ---- the readers of every data kind, in one process (each zoo.* command costs seconds of imports) ---------
def write_readers_data(root: Path) -> dict[str, tuple[Path, int]]:
    """Valid files of each reader, and {case: (the path to lock, its mode)}."""
    sys.path[:0] = [str(ROOT / "tests" / d) for d in ("captioning", "maml", "ood")]
    from tiny_karpathy import write_tiny_karpathy
    from tiny_omniglot import write_tiny_omniglot
    from tiny_ood_files import write_image_folder, write_mnist, write_svhn

    from zoo.models.seqgan.oracle import random_oracle_params, save_oracle_npz

    write_mnist(root, gz=False)
    write_svhn(root)
    write_image_folder(root / "ood_folder", n=2)
    write_tiny_omniglot(root, alphabets=(1, 1), characters=2, drawings=2)
    write_tiny_karpathy(root / "flickr8k", n=5)
    save_oracle_npz(random_oracle_params(0, 20, 4, 4), root / "oracle.npz")
    (root / "lines.txt").write_text("a b c\n" * 20)
    (root / "corpus").mkdir()
    (root / "corpus" / "text.txt").write_text("king queen man woman\n" * 50)
    shutil.copy(root / "corpus" / "text.txt", root / "skipgram.txt")
    (root / "analogies.txt").write_text(": family\nking queen man woman\n")
    (root / "model.ckpt").write_bytes(b"PK")
    (root / "read-only").mkdir()
    png = next((root / "omniglot").rglob("*.png"))
    return {"idx": (root / "mnist" / "train-images-idx3-ubyte", 0o000),
            "svhn": (root / "svhn" / "train_32x32.mat", 0o000), "ood_folder": (root / "ood_folder", 0o000),
            "omniglot": (png, 0o000), "karpathy": (root / "flickr8k" / "images" / "0_img.png", 0o000),
            "oracle": (root / "oracle.npz", 0o000), "lines": (root / "lines.txt", 0o000),
            "corpus_folder": (root / "corpus", 0o300), "test_analogies": (root / "analogies.txt", 0o000),
            "checkpoint": (root / "model.ckpt", 0o000), "output": (root / "read-only", 0o500),
            "export": (root / "read-only", 0o500)}


def readers(root: Path) -> dict:
    """{case: a call of one reader} (run in the child process)."""
    from zoo.hub import read_checkpoint
    from zoo.models.captioning.data import KarpathyData
    from zoo.models.maml.omniglot import load_images
    from zoo.models.ood.realdata import load_folder, load_svhn
    from zoo.models.seqgan.oracle import load_oracle_npz
    from zoo.models.seqgan.text import read_lines
    from zoo.models.skipgram.corpus import resolve_files
    from zoo.models.skipgram.data import TextCorpusData
    from zoo.models.vae.data import read_idx
    from zoo.options import check_output_file
    from zoo.pretrained.__main__ import export

    karpathy = {"json": str(root / "flickr8k" / "dataset_flickr8k.json"), "min_freq": 1,
                "image_dir": str(root / "flickr8k" / "images")}
    skipgram = {"files": str(root / "skipgram.txt"), "root": str(root), "min_count": 1, "val_similarity": [],
                "test_similarity": [], "test_analogies": [str(root / "analogies.txt")]}
    return {
        "idx": lambda: read_idx(root / "mnist" / "train-images-idx3-ubyte"),
        "svhn": lambda: load_svhn(root),
        "ood_folder": lambda: load_folder(root / "ood_folder", [3, 32, 32]),
        "omniglot": lambda: load_images(root / "omniglot", 28),
        "karpathy": lambda: KarpathyData(karpathy).setup("fit"),
        "oracle": lambda: load_oracle_npz(root / "oracle.npz"),
        "lines": lambda: read_lines(root / "lines.txt", True),
        "corpus_folder": lambda: resolve_files(str(root / "corpus")),
        "test_analogies": lambda: TextCorpusData(skipgram).setup("fit"),
        "checkpoint": lambda: read_checkpoint(root / "model.ckpt"),
        "output": lambda: check_output_file(root / "read-only" / "x.png", "out"),
        "export": lambda: export(str(root / "model.ckpt"), "entry", "", {}, out_dir=root / "read-only"),
    }


def report_readers(root: str) -> None:
    """Child process: every reader's refusal, as JSON {case: [is a UserError, message]}."""
    from zoo.errors import UserError, as_user_error

    out = {}
    for case, call in readers(Path(root)).items():
        try:
            call()
            out[case] = [False, "no error"]
        except Exception as err:
            user = as_user_error(err) if not isinstance(err, UserError) else err
            out[case] = [user is not None, str(user or f"{type(err).__name__}: {err}")]
    print(json.dumps(out))


def test_every_reader_names_the_file_it_may_not_read(tmp_path, lock):
    root = tmp_path / "data"
    locked = write_readers_data(root)
    for path, mode in locked.values():
        lock(path, mode)
    code = f"import sys, test_user_errors_unreadable as t; t.report_readers({str(root)!r})"
    result = subprocess.run(enforced([sys.executable, "-c", code]), cwd=tmp_path, env=subprocess_env(),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(report) == set(locked)
    for case, (is_user_error, message) in report.items():
        path, _ = locked[case]
        assert is_user_error and str(path) in message and "chmod" in message, (case, message)
        assert message.startswith("cannot "), (case, message)  # not "not found" / "not a valid file"
    assert not (root / "skipgram_cache").exists(), "the test files are checked before the corpus is encoded"


# ---- the shared helper, in this process ------------------------------------------------------------
def test_permission_denied_finds_the_file_behind_another_librarys_error(tmp_path):
    import errno

    from zoo.errors import as_user_error, permission_denied

    denied = PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "x.bin"))
    wrapped = RuntimeError("cannot load")
    wrapped.__cause__ = denied
    assert str(tmp_path / "x.bin") in str(as_user_error(wrapped))
    assert permission_denied(RuntimeError("a bug")) is None
    assert permission_denied(PermissionError(errno.EACCES, "no filename")) is None  # nothing to name: a bug
    read_only = OSError(errno.EROFS, "Read-only file system", str(tmp_path / "y.png"))
    assert "read-only file system" in str(permission_denied(read_only))
    # met inside trainer.fit (a reader in a DataLoader worker): zoo.train's fit handler takes it as the
    # user's, so the run folder it made is removed as for any other user error
    from zoo.train import user_error_in_fit

    assert str(tmp_path / "x.bin") in str(user_error_in_fit(wrapped))
    assert user_error_in_fit(RuntimeError("a bug")) is None
