"""Real datasets fetched on first use (zoo/core/downloads.py), against a server on 127.0.0.1 that the
tests fill with files they write and whose checksums they supply. The suite itself never reaches the
network: conftest sets ZOO_OFFLINE=1, which lets only 127.0.0.1 through."""

import hashlib
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from platform_testlib import ROOT, run_main, subprocess_env

from zoo.core import downloads as D
from zoo.errors import UserError

HANG = 600  # seconds after which a child that should have ended is called hung: a guard, never a window to hit


class Files(ThreadingHTTPServer):
    """Serves ``files`` (path -> bytes) with HTTP Range; ``cut`` (path -> n): the next answer for that
    path sends n bytes of the promised length, then closes the connection. ``log``: (path, Range)."""

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.files: dict[str, bytes] = {}
        self.cut: dict[str, int] = {}
        self.log: list[tuple[str, str | None]] = []
        self.url = f"http://127.0.0.1:{self.server_address[1]}"

    def gets(self, path: str) -> list[str | None]:
        """The Range headers of the GETs of ``path``, in order (None: the whole file)."""
        return [r for p, r in self.log if p == path]


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        srv: Files = self.server
        srv.log.append((self.path, self.headers.get("Range")))
        data = srv.files.get(self.path)
        if data is None:
            self.send_error(404)
            return
        start = int(self.headers["Range"].split("=")[1].split("-")[0]) if self.headers.get("Range") else 0
        if start >= len(data):
            self.send_error(416)
            return
        self.send_response(206 if start else 200)
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.send_header("Content-Length", str(len(data) - start))
        self.end_headers()
        body = data[start:]
        cut = srv.cut.pop(self.path, None)
        self.wfile.write(body if cut is None else body[:cut])  # a cut answer: the connection closes short

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    srv = Files()
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def md5(data: bytes) -> str:
    return "md5:" + hashlib.md5(data).hexdigest()


def publish(monkeypatch, name: str, files: dict[str, tuple[list[str], bytes]]) -> None:
    """A dataset ``name`` of files {file name: (addresses, bytes whose md5 is its checksum)}."""
    remotes = tuple(D.Remote(n, tuple(urls), md5(data), "1 KB") for n, (urls, data) in files.items())
    monkeypatch.setitem(D.DATASETS, name, D.Published(name, "https://example.org/" + name, remotes))


def test_a_file_arrives_checked_and_a_cut_off_transfer_resumes_where_it_stopped(server, monkeypatch, tmp_path):
    data = np.random.default_rng(0).integers(0, 256, 3_000_000, dtype=np.uint8).tobytes()
    server.files["/pub/big.bin"] = data
    server.cut["/pub/big.bin"] = 1_000_000  # the first answer stops after 1 MB
    publish(monkeypatch, "big", {"big.bin": ([server.url + "/pub/big.bin"], data)})
    D.fetch("big", tmp_path / "big")
    assert (tmp_path / "big" / "big.bin").read_bytes() == data
    first, then = server.gets("/pub/big.bin")  # resumed from the last whole chunk kept, not started over
    assert first is None and then.startswith("bytes=") and 0 < int(then[6:-1]) <= 1_000_000, server.log
    assert sorted(p.name for p in (tmp_path / "big").iterdir()) == [".big.fetch.lock", "big.bin"]  # no part file
    D.fetch("big", tmp_path / "big")  # present: nothing asked for
    assert len(server.log) == 2


def test_a_wrong_checksum_is_refused_and_the_file_removed(server, monkeypatch, tmp_path):
    server.files["/pub/a.bin"] = b"what the server has"
    publish(monkeypatch, "a", {"a.bin": ([server.url + "/pub/a.bin"], b"what the publisher published")})
    with pytest.raises(UserError, match=r"(?s)a.bin does not match its published checksum; the file was "
                                        r"removed.*\n  a.bin from http://127.0.0.1:\d+/pub/a.bin: "
                                        r"md5:[0-9a-f]{32} published") as err:
        D.fetch("a", tmp_path)
    assert err.value.exit_code == 2
    assert [p.name for p in tmp_path.iterdir()] == [".a.fetch.lock"]  # neither the file nor a part of it


def test_no_server_is_one_error_naming_the_addresses_and_download_false_touches_nothing(server, monkeypatch,
                                                                                       tmp_path):
    closed = ThreadingHTTPServer(("127.0.0.1", 0), Handler)  # a port nothing listens on once closed
    port = closed.server_address[1]
    closed.server_close()
    urls = [f"http://127.0.0.1:{port}/gone.bin", "https://publisher.example.org/gone.bin"]
    publish(monkeypatch, "gone", {"gone.bin": (urls, b"x")})
    start = time.monotonic()
    with pytest.raises(UserError) as err:
        D.fetch("gone", tmp_path, missing=UserError("gone not found in here"))
    message = str(err.value)
    lines = message.splitlines()  # what is wrong and the fix, then the details a line each
    assert lines[0].startswith("gone is missing and could not be fetched: on a machine with internet"), message
    assert lines[1:3] == ["  gone not found in here", "  gone.bin tried at:"], message
    assert f"    http://127.0.0.1:{port}/gone.bin (ConnectionError" in lines[3], message
    assert lines[4] == "    https://publisher.example.org/gone.bin (not tried: ZOO_OFFLINE=1)", message
    assert lines[5:] == [f"  gone (https://example.org/gone) into {tmp_path}/:",
                         f"    gone.bin (1 KB, {md5(b'x')}) from {' or '.join(urls)}"], message
    assert time.monotonic() - start < 60  # refused at once, no retry loop
    server.files["/pub/b.bin"] = b"b"
    publish(monkeypatch, "b", {"b.bin": ([server.url + "/pub/b.bin"], b"b")})
    with pytest.raises(UserError, match=rf"b is missing and data.download=false: nothing is fetched.*\n  b \(.*\) "
                                        rf"into {tmp_path}/:\n    b.bin \(1 KB, md5:\w+\) from {server.url}/pub/b.bin"):
        D.fetch("b", tmp_path, download=False)
    assert server.log == [] and not (tmp_path / "b.bin").exists()


def test_the_mirror_variable_is_tried_first_and_the_publisher_after_it(server, monkeypatch, tmp_path):
    server.files["/mirror/m.bin"] = server.files["/pub/m.bin"] = b"m" * 100
    publish(monkeypatch, "m", {"m.bin": ([server.url + "/pub/m.bin"], b"m" * 100)})
    monkeypatch.setenv("ZOO_DATA_MIRROR", server.url + "/mirror/")
    D.fetch("m", tmp_path / "one")
    assert server.log == [("/mirror/m.bin", None)]
    del server.files["/mirror/m.bin"]  # a mirror without the file: the publisher's address next
    D.fetch("m", tmp_path / "two")
    assert [p for p, _ in server.log[1:]] == ["/mirror/m.bin", "/pub/m.bin"]
    assert (tmp_path / "two" / "m.bin").read_bytes() == b"m" * 100
    monkeypatch.setenv("ZOO_DATA_MIRROR", "no-scheme")  # a mistyped mirror is one failed address, not a checksum
    D.fetch("m", tmp_path / "three")  # (the bad address itself: requests' MissingSchema, a ValueError)
    assert server.log[-1] == ("/pub/m.bin", None) and (tmp_path / "three" / "m.bin").is_file()


WAITER = """
import sys
from pathlib import Path
from zoo.core import downloads as D


class Told(D.FileLock):  # says when it starts waiting for the lock the test holds
    def acquire(self, *args, **kwargs):
        Path(sys.argv[2]).touch()
        return super().acquire(*args, **kwargs)

D.FileLock = Told
D.DATASETS["w"] = D.Published("w", "https://example.org", (D.Remote("w.bin", (sys.argv[3],), None, "1 KB"),))
D.fetch("w", Path(sys.argv[1]))
"""


def test_a_process_waiting_for_another_fetch_of_the_same_folder_finds_the_file_and_fetches_nothing(server,
                                                                                                   tmp_path):
    from filelock import FileLock

    server.files["/pub/w.bin"] = b"w"
    lock = FileLock(str(tmp_path / ".w.fetch.lock"))
    with lock:  # this test is the process fetching
        child = subprocess.Popen([sys.executable, "-c", WAITER, str(tmp_path), str(tmp_path / "waiting"),
                                  server.url + "/pub/w.bin"], env=subprocess_env(), cwd=ROOT,
                                 stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + HANG
        while not (tmp_path / "waiting").exists():  # the child has seen the file missing and waits for the lock
            assert child.poll() is None and time.monotonic() < deadline, child.communicate()
            time.sleep(0.02)
        (tmp_path / "w.bin").write_bytes(b"w")  # what this fetch brings
    assert child.wait(timeout=HANG) == 0, child.stderr.read()
    assert server.log == []  # the waiting process fetched nothing


def write_mnist(folder: Path) -> dict[str, bytes]:
    """Four gzipped IDX files in MNIST's format: 60 training and 20 test images of 28 x 28."""
    from zoo.models.vae.data import write_idx

    rng = np.random.default_rng(0)
    arrays = {"train-images-idx3-ubyte.gz": rng.integers(0, 256, (60, 28, 28), dtype=np.uint8),
              "train-labels-idx1-ubyte.gz": rng.integers(0, 10, 60, dtype=np.uint8),
              "t10k-images-idx3-ubyte.gz": rng.integers(0, 256, (20, 28, 28), dtype=np.uint8),
              "t10k-labels-idx1-ubyte.gz": rng.integers(0, 10, 20, dtype=np.uint8)}
    return {n: write_idx(folder / n, a).read_bytes() for n, a in arrays.items()}


def serve_mnist(server, monkeypatch, tmp_path, bad: str = "") -> dict[str, bytes]:
    """MNIST's four files on the server's /mirror/, the publisher unreachable (ZOO_OFFLINE), ZOO_DATA_MIRROR
    set; ``bad``: a file whose published checksum differs from the served one."""
    files = write_mnist(tmp_path / "served")
    for n, data in files.items():
        server.files[f"/mirror/{n}"] = data
    publish(monkeypatch, "mnist", {n: ([f"https://publisher.example.org/{n}"], b"other" if n == bad else data)
                                   for n, data in files.items()})
    monkeypatch.setenv("ZOO_DATA_MIRROR", server.url + "/mirror")
    return files


MNIST_ARGS = ["recipe=vae_mnist", "data.val_size=10", "data.batch_size=10", "data.eval_batch_size=10",
              "model.hidden=16", "model.latent_dim=2", "model.iwae_samples=2", "trainer.max_epochs=1",
              "trainer.limit_train_batches=1", "trainer.limit_val_batches=1", "test_after_fit=false",
              "trainer.enable_progress_bar=false"]


def test_vae_mnist_fetches_mnist_from_the_mirror_and_trains(server, monkeypatch, tmp_path, capsys):
    files = serve_mnist(server, monkeypatch, tmp_path)
    code, err = run_main([*MNIST_ARGS, f"data.root={tmp_path / 'data'}", f"run_dir={tmp_path}/runs"], capsys)
    assert code == 0, err
    assert sorted(p for p, _ in server.log) == sorted(f"/mirror/{n}" for n in files)  # each once, from the mirror
    assert all((tmp_path / "data" / "mnist" / n).read_bytes() == d for n, d in files.items())
    assert len(list((tmp_path / "runs").glob("*/*/checkpoints/*.ckpt"))) >= 1  # trained its step, saved


def test_vae_mnist_refuses_a_file_whose_checksum_differs_exit_status_2(server, monkeypatch, tmp_path, capsys):
    files = serve_mnist(server, monkeypatch, tmp_path, bad="t10k-images-idx3-ubyte.gz")
    code, err = run_main([*MNIST_ARGS, f"data.root={tmp_path / 'data'}", f"run_dir={tmp_path}/runs"], capsys)
    said = err.strip().splitlines()
    error = next(i for i, line in enumerate(said) if line.startswith("error: "))  # its details below it
    assert code == 2 and "Traceback" not in err and all(line.startswith("  ") for line in said[error + 1:]), err
    fetched = [line.split(" (")[0] for line in said[:error]]
    assert fetched == [f"fetching {n}" for n in list(files)[:3]], said  # the bad one is the third
    assert "MNIST not found" in err and "t10k-images-idx3-ubyte.gz from " + server.url in err, err
    assert len(said[error]) <= len("error: ") + 200, said[error]
    assert "does not match its published checksum" in err and "the file was removed" in err, err
    kept = sorted(p.name for p in (tmp_path / "data" / "mnist").iterdir() if not p.name.startswith("."))
    assert kept == ["train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"]  # fetched before it; none after
    assert len(files) == 4 and not (tmp_path / "runs").exists()


DDP_RECIPE = """\
model: {name: "toymodel:Toy"}
data: {name: "toymodel:FetchedToyData", root: "%s", url: "%s", md5: "%s"}
trainer: {max_epochs: 1, accelerator: cpu, devices: 2, strategy: ddp, enable_progress_bar: false,
          enable_model_summary: false, num_sanity_val_steps: 0}
test_after_fit: false
"""


@pytest.mark.slow
def test_two_ddp_processes_fetch_the_data_once(server, tmp_path):
    data = np.random.default_rng(0).standard_normal((64, 9)).astype(np.float32)
    import io

    buf = io.BytesIO()
    np.save(buf, data)
    server.files["/pub/toy.npy"] = buf.getvalue()
    recipe = tmp_path / "toy.yaml"
    recipe.write_text(DDP_RECIPE % (tmp_path / "data", server.url + "/pub/toy.npy", md5(buf.getvalue())))
    proc = subprocess.run([sys.executable, "-m", "zoo.train", f"recipe={recipe}", f"run_dir={tmp_path}/runs"],
                          env=subprocess_env(), capture_output=True, text=True, timeout=HANG)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert server.log == [("/pub/toy.npy", None)]  # one fetch for both ranks
    assert np.array_equal(np.load(tmp_path / "data" / "toy.npy"), data)


def test_download_false_names_what_to_fetch_and_where_from_the_command_line(tmp_path, capsys):
    code, err = run_main(["recipe=maml_omniglot_5w1s", f"data.root={tmp_path}", "data.download=false",
                          f"run_dir={tmp_path}/runs"], capsys)
    first, *details = err.strip().splitlines()  # what is wrong and the fix; the files and addresses below
    assert code == 2 and "Traceback" not in err and first.startswith("error: ") and len(first) < 200, err
    assert "data.download=false: nothing is fetched" in first and "Omniglot not found" in details[0], err
    assert details[-3].endswith(f" into {tmp_path / 'omniglot'}/:"), err
    assert details[-2] == ("    images_background.zip (9.5 MB, md5:68d2efa1b9178cc56df9314c21c6e718) from "
                           "https://raw.githubusercontent.com/brendenlake/omniglot/master/python/images_background.zip")
    assert not (tmp_path / "omniglot").exists()


def test_imagenet_weights_offline_say_where_to_put_them(monkeypatch, tmp_path):
    from zoo.models.captioning.nets import TorchvisionEncoder

    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    with pytest.raises(UserError, match=r"ImageNet weights for resnet\w* not found: copy the file .*"
                                        rf"ZOO_OFFLINE=1: not fetched\)\n.*\n  its place: {tmp_path}/"):
        TorchvisionEncoder("resnet50")


@pytest.mark.parametrize("make, expected", [
    (lambda root: ("ood_images", {"root": root, "dataset": "svhn"}),
     "SVHN not found.* into {root}/svhn/:\n    train_32x32.mat "
     "\\(182 MB, md5:e26dedcc434d2e4c54c9b2d4a06d8373\\) from "
     "http://ufldl.stanford.edu/housenumbers/train_32x32.mat\n    test_32x32.mat"),
    (lambda root: ("ood_images", {"root": root, "dataset": "cifar10"}),
     "CIFAR-10 not found.* into {root}/:\n    cifar-10-binary.tar.gz "
     "\\(162 MB, md5:c32a1d4ab5d03f1284b67883e8d87530\\)"),
    (lambda root: ("ood_images", {"root": root, "dataset": "fashion_mnist"}),
     "into {root}/fashion_mnist/:\n    train-images-idx3-ubyte.gz .* from http://fashion-mnist"),
    (lambda root: ("karpathy", {"root": root, "dataset": "coco"}),
     "into {root}/:\n    caption_datasets.zip \\(36 MB\\) from https://cs.stanford.edu/people/karpathy/deepimagesent/"),
])
def test_each_datamodule_names_its_files_and_folder_with_download_false(make, expected, tmp_path):
    from zoo.registry import DATAMODULES

    name, cfg = make(str(tmp_path))
    dm = DATAMODULES.get(name)({**cfg, "download": False})
    with pytest.raises(UserError, match="(?s)" + expected.format(root=tmp_path)):
        dm.prepare_data()
    assert not any(tmp_path.iterdir())  # nothing written, nothing fetched


def test_coco_images_are_fetched_into_their_folder_once_the_splits_are_there(tmp_path):
    from zoo.models.captioning.data import KarpathyData

    (tmp_path / "caption_datasets.zip").write_bytes(b"")  # the split file is there: only the images are missing
    dm = KarpathyData({"root": str(tmp_path), "dataset": "coco", "download": False})
    with pytest.raises(UserError, match=rf"into {tmp_path}/coco/:\n    train2014.zip \(13 GB, "
                                        r"md5:0da8c0bd3d6becc4dcb32757491aca88\) from "
                                        r"http://images.cocodataset.org/zips/train2014.zip\n    "
                                        r"val2014.zip \(6.2 GB"):
        dm.prepare_data()


def test_text8_is_fetched_from_the_mirror_and_unzipped_beside_the_missing_path(server, monkeypatch, tmp_path):
    import io
    import zipfile

    from zoo.models.skipgram.data import TextCorpusData

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("text8", " anarchism originated as a term of abuse")
    server.files["/mirror/text8.zip"] = buf.getvalue()
    monkeypatch.setenv("ZOO_DATA_MIRROR", server.url + "/mirror")
    dm = TextCorpusData({"root": str(tmp_path), "files": str(tmp_path / "data" / "text8")})
    assert dm.corpus_files() == [tmp_path / "data" / "text8"]  # text8.zip publishes no checksum: none to check
    assert (tmp_path / "data" / "text8").read_text() == " anarchism originated as a term of abuse"
    assert server.log == [("/mirror/text8.zip", None)]


def test_odin_folder_named_in_data_ood_is_fetched_as_its_archive_and_read(server, monkeypatch, tmp_path):
    import io
    import tarfile

    from PIL import Image

    from zoo.models.ood.data import OODImages

    write_mnist(tmp_path / "mnist")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for i in range(4):
            png = io.BytesIO()
            Image.new("RGB", (36, 36), (60 * i, 0, 0)).save(png, format="PNG")
            info = tarfile.TarInfo(f"LSUN_resize/{i}.png")
            info.size = len(png.getvalue())
            tar.addfile(info, io.BytesIO(png.getvalue()))
    server.files["/pub/LSUN_resize.tar.gz"] = buf.getvalue()
    publish(monkeypatch, "LSUN_resize", {"LSUN_resize.tar.gz": ([server.url + "/pub/LSUN_resize.tar.gz"],
                                                                buf.getvalue())})
    dm = OODImages({"root": str(tmp_path), "dataset": "mnist", "ood": ["folder:LSUN_resize"], "val_size": 10,
                    "ood_val_size": 2})
    dm.prepare_data()
    assert (tmp_path / "LSUN_resize.tar.gz").read_bytes() == buf.getvalue()
    assert server.log == [("/pub/LSUN_resize.tar.gz", None)]
    assert dm.info()["ood_sets"] == ["LSUN_resize"]
    assert len(dm.parts["val_ood"]["LSUN_resize"]) + len(dm.parts["test_ood"]["LSUN_resize"]) == 4


def test_imagenet_weights_are_fetched_into_torch_hubs_cache_checked_by_the_hash_in_their_name(server, tmp_path):
    import io

    import torch

    from zoo.models.captioning.nets import fetch_weights

    buf = io.BytesIO()
    torch.save({"w": torch.arange(3.0)}, buf)
    name = f"tiny-{hashlib.sha256(buf.getvalue()).hexdigest()[:8]}.pth"  # torchvision's names carry their hash
    server.files[f"/weights/{name}"] = buf.getvalue()
    server.files["/weights/tiny-00000000.pth"] = buf.getvalue()
    fetch_weights("tiny", tmp_path / "hub" / "checkpoints" / name, f"{server.url}/weights/{name}")
    assert torch.equal(torch.load(tmp_path / "hub" / "checkpoints" / name, weights_only=True)["w"], torch.arange(3.0))
    with pytest.raises(UserError, match=r"(?s)ImageNet weights for tiny not found: .*\n  fetching it failed: .*hash"):
        fetch_weights("tiny", tmp_path / "hub" / "checkpoints" / "tiny-00000000.pth",
                      f"{server.url}/weights/tiny-00000000.pth")
    assert not (tmp_path / "hub" / "checkpoints" / "tiny-00000000.pth").exists()  # refused, not kept
