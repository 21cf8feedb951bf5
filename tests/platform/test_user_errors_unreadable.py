"""Files the user may not read and folders they may not write in: one 'error:' line that names the
path and the chmod that fixes it, exit status 2, no traceback, nothing left behind, not a
PermissionError traceback from whichever reader meets the file first (omegaconf, torch.load, PIL, a
DataLoader worker during training), or a message blaming the file's contents ("not a valid IDX
file: download it again"), or "holds no images" for a folder that cannot be listed.

The commands run as subprocesses with the permissions enforced: as root, chmod alone stops nothing,
so root's override capabilities are dropped with setpriv (util-linux)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from platform_testlib import ROOT, enforced, subprocess_env


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


def assert_refused(result: dict, path: Path, runs: Path | None = None) -> str:
    err = result["err"]
    assert result["code"] == 2 and "Traceback" not in err and err.strip(), err
    lines = err.strip().splitlines()
    first = max(i for i, line in enumerate(lines) if line.startswith("error: "))
    assert all(line.startswith("  ") for line in lines[first + 1:]), err  # the message's details, indented
    last = "\n".join(lines[first:])  # a message too long for one line gives the path and the chmod below it
    assert str(path) in last and "chmod" in last, err
    assert runs is None or not runs.exists() or not any(runs.iterdir()), "nothing written for a refused run"
    return last


# ---- the commands, in one child process (each zoo.* command costs seconds of imports) -------------
def prepare_commands(root: Path, chmod) -> dict[str, dict]:
    """{case: {"argv": [module, *args], "cwd": folder, ...what the test checks}}, each in a folder of its
    own under ``root``, with its files locked."""
    from PIL import Image

    cases: dict[str, dict] = {}

    def case(name: str, *argv: object, **facts: Path) -> Path:
        folder = root / name
        cases[name] = {"argv": [str(a) for a in argv], "cwd": str(folder), **{k: str(v) for k, v in facts.items()}}
        return folder

    recipe = root / "recipe" / "secret.yaml"
    recipe.parent.mkdir(parents=True)
    shutil.copy(ROOT / "recipes" / "vae" / "vae_digits.yaml", recipe)
    chmod(recipe)
    case("recipe", "train", f"recipe={recipe}", f"run_dir={root / 'recipe' / 'runs'}", path=recipe)

    for name, locked in (("last_ckpt", "last.ckpt"), ("checkpoints_folder", "")):
        folder = root / name / "runs" / "vae_digits" / "20240101-000000" / "checkpoints"
        folder.mkdir(parents=True)
        (folder / "last.ckpt").write_bytes(b"PK")
        chmod(folder / locked if locked else folder)  # a folder: its glob would pass it over ("no earlier run")
        case(name, "train", "recipe=vae_digits", f"run_dir={root / name / 'runs'}", "ckpt_path=last",
             path=folder / locked if locked else folder)
        cases[name]["before"] = [str(p) for p in sorted((root / name).rglob("*"))]

    mine, closed = root / "recon" / "mine", root / "recon" / "read-only"
    for folder in (mine, closed):
        folder.mkdir(parents=True)
        Image.new("L", (8, 8), 0).save(folder / "digit.png")
    chmod(closed, 0o500)
    case("recon", "predict", "vae-digits", mine / "digit.png", closed / "digit.png", path=closed, mine=mine)

    for module in ("evaluate", "predict"):
        ckpt = root / f"ckpt_{module}" / "model.ckpt"
        ckpt.parent.mkdir()
        ckpt.write_bytes(b"PK")  # never opened: what it holds does not matter
        chmod(ckpt)
        case(f"ckpt_{module}", module, ckpt, path=ckpt)

    for name, argv in (("out", ["predict", "vae-digits", "out={}/samples.png", "n=4"]),
                       ("plots_dir", ["evaluate", "vae-digits", "plots_dir={}/plots"])):
        folder = root / name / "read-only"
        folder.mkdir(parents=True)
        chmod(folder, 0o500)
        case(name, *[a.format(folder) for a in argv], path=folder)
    return cases


def run_commands(cases: str) -> None:
    """Child process: each case's command run by its main(), as JSON {case: {"code": .., "err": ..}}."""
    import contextlib
    import importlib
    import io

    out = {}
    for name, spec in json.loads(Path(cases).read_text()).items():
        os.chdir(spec["cwd"] if os.path.isdir(spec["cwd"]) else Path(cases).parent)
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = importlib.import_module(f"zoo.{spec['argv'][0]}").main(spec["argv"][1:])
        out[name] = {"code": code, "err": err.getvalue()}
    print(json.dumps(out))


@pytest.fixture(scope="module")
def commands(tmp_path_factory):
    """Every case of ``prepare_commands``, run once under enforced permissions: {case: facts + result}."""
    root = tmp_path_factory.mktemp("commands")
    changed: list[tuple[Path, int]] = []

    def chmod(path: Path, mode: int = 0o000) -> None:
        changed.append((path, path.stat().st_mode & 0o7777))
        os.chmod(path, mode)

    try:
        cases = prepare_commands(root, chmod)
        (root / "cases.json").write_text(json.dumps(cases))
        code = f"import test_user_errors_unreadable as t; t.run_commands({str(root / 'cases.json')!r})"
        result = subprocess.run(enforced([sys.executable, "-c", code]), cwd=root, env=subprocess_env(),
                                capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr
        outcomes = json.loads(result.stdout.strip().splitlines()[-1])
        yield {name: {**cases[name], **outcomes[name]} for name in cases}
    finally:
        for path, mode in reversed(changed):
            os.chmod(path, mode)


def test_an_unreadable_recipe(commands):
    case = commands["recipe"]
    last = assert_refused(case, Path(case["path"]), Path(case["cwd"]) / "runs")
    assert f"chmod +r {case['path']}" in last


def test_resuming_from_an_unreadable_last_checkpoint_writes_nothing(commands):
    case = commands["last_ckpt"]
    assert_refused(case, Path(case["path"]))
    assert [str(p) for p in sorted(Path(case["cwd"]).rglob("*"))] == case["before"]


def test_resuming_the_last_run_whose_checkpoints_folder_is_closed_names_the_folder(commands):
    case = commands["checkpoints_folder"]
    last = assert_refused(case, Path(case["path"]))
    assert f"chmod +rx {case['path']}" in last and "no earlier run" not in last


def test_reconstructions_beside_inputs_in_a_closed_folder_are_refused_before_any_is_written(commands):
    case = commands["recon"]
    assert_refused(case, Path(case["path"]))
    assert sorted(p.name for p in Path(case["mine"]).iterdir()) == ["digit.png"]  # the first input's neither


@pytest.mark.parametrize("module", ["evaluate", "predict"])
def test_an_unreadable_checkpoint(module, commands):
    case = commands[f"ckpt_{module}"]
    assert_refused(case, Path(case["path"]))


def test_an_output_in_a_folder_that_may_not_be_written(commands):
    case = commands["out"]
    last = assert_refused(case, Path(case["path"]))
    assert "out=" in last and not any(Path(case["path"]).iterdir())


def test_evaluate_refuses_a_plots_dir_it_may_not_make(commands):
    case = commands["plots_dir"]
    last = assert_refused(case, Path(case["path"]))
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
    from zoo.loading import read_checkpoint
    from zoo.models.captioning.data import KarpathyData
    from zoo.models.maml.omniglot import load_images
    from zoo.models.ood.readers import load_folder, load_svhn
    from zoo.models.seqgan.data import read_lines
    from zoo.models.seqgan.oracle import load_oracle_npz
    from zoo.models.skipgram.corpus import resolve_files
    from zoo.models.skipgram.data import TextCorpusData
    from zoo.models.vae.data import read_idx
    from zoo.paths import check_output_file
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
                            capture_output=True, text=True, timeout=600)
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
    from zoo.cli import user_error_in_fit

    assert str(tmp_path / "x.bin") in str(user_error_in_fit(wrapped))
    assert user_error_in_fit(RuntimeError("a bug")) is None
