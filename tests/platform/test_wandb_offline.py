"""W&B with credentials but no network (a compute node): a short probe of the server sends the run offline at
once; an online start that fails falls back to offline under an id of its own (wandb's service still holds the
failed start's); an offline run says once where it is and how to upload it. No test leaves 127.0.0.1."""

import http.server
import socket
import threading
import time
from collections.abc import Iterator

import pytest
import wandb
from test_wandb_resume import offline_ids

import zoo.tracking
from zoo.tracking import RUN_ID_FILE
from zoo.train import main

KEY = "k" * 40  # an API key of W&B's length: credentials found, never sent anywhere but 127.0.0.1


class _Answers(http.server.BaseHTTPRequestHandler):
    """Answers every request with 404: the probe's HEAD is answered; wandb's start (its GraphQL POSTs) fails,
    and its telemetry, told the server has no such endpoint, sends nothing. With ``location``: a redirect there."""

    location = ""

    def _answer(self) -> None:
        self.send_response(302 if self.location else 404)
        if self.location:
            self.send_header("Location", self.location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_HEAD = do_GET = do_POST = _answer

    def log_message(self, *args) -> None:
        pass


def serve(handler: type) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def answering() -> Iterator[str]:
    """The URL of a local HTTP server that answers every request with 404."""
    yield from serve(_Answers)


@pytest.fixture
def refusing() -> Iterator[str]:
    """The URL of a local port that refuses connections (bound, not listening: held so no one else takes it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
def silent() -> Iterator[str]:
    """The URL of a local port that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(4)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_the_probe_refused_and_unanswered_and_answered(refusing, silent, answering):
    assert "refused" in zoo.tracking.unreachable(refusing, timeout=5)
    start = time.monotonic()
    said = zoo.tracking.unreachable(silent, timeout=0.5)
    assert said is not None and ("timed out" in said or "no answer in 0.5 s" in said), said
    assert time.monotonic() - start < 5, "bounded by its timeout"
    assert zoo.tracking.unreachable(answering, timeout=5) is None, "a 404 is an answer: the server is there"
    redirects = type("Redirects", (_Answers,), {"location": refusing + "/elsewhere"})
    for url in serve(redirects):
        assert zoo.tracking.unreachable(url, timeout=5) is None, "a redirect is an answer; where it points is not asked"


@pytest.fixture
def credentials(monkeypatch, tmp_path) -> None:
    """An API key, no mode chosen (online, as on a machine where `wandb login` ran), and a settings folder
    of the test's own."""
    monkeypatch.setenv("WANDB_API_KEY", KEY)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb-config"))
    monkeypatch.setenv("WANDB_ERROR_REPORTING", "false")  # wandb's reports of its own errors go to another host


def train_logged(toy_recipe, tmp_path, capsys) -> tuple[int, str]:
    code = main([f"recipe={toy_recipe}", f"run_dir={tmp_path}/runs", "logger=[csv,wandb]", "trainer.max_epochs=1"])
    return code, capsys.readouterr().err


def run_folder(tmp_path):
    (found,) = (tmp_path / "runs" / "toy").iterdir()
    return found


def test_a_server_that_cannot_be_reached_sends_the_run_offline_at_once(toy_recipe, tmp_path, monkeypatch, capsys,
                                                                      credentials, refusing):
    monkeypatch.setenv("WANDB_BASE_URL", refusing)
    monkeypatch.setattr(zoo.tracking, "_settings", lambda: wandb.Settings(init_timeout=3, silent=True))
    code, err = train_logged(toy_recipe, tmp_path, capsys)
    run_dir = run_folder(tmp_path)
    assert code == 0 and (run_dir / "checkpoints" / "last.ckpt").is_file(), err
    said = [line for line in err.splitlines() if "W&B" in line]
    assert len(said) == 1 and said[0].startswith("warning: W&B logs offline") and refusing in said[0], err
    assert f"wandb sync {run_dir}/wandb/offline-run-*" in said[0]
    # an online start tried (and failed) would have left the folder's id to wandb's service: a new one offline
    assert offline_ids(run_dir) == [(run_dir / RUN_ID_FILE).read_text().strip()], "no online start: the folder's id"


def test_a_failed_online_start_falls_back_offline_under_its_own_id(toy_recipe, tmp_path, monkeypatch, capsys,
                                                                  credentials, answering):
    """The server answers the probe, and wandb's online start fails (here every request is a 404, and wandb
    waits 3 s, not the run's 60): the run trains offline, keeps its folder, and says so in one line."""
    monkeypatch.setenv("WANDB_BASE_URL", answering)
    monkeypatch.setattr(zoo.tracking, "_settings", lambda: wandb.Settings(init_timeout=3, silent=True))
    code, err = train_logged(toy_recipe, tmp_path, capsys)
    assert code == 0 and "Traceback" not in err, err
    run_dir = run_folder(tmp_path)
    assert (run_dir / "checkpoints" / "last.ckpt").is_file() and (run_dir / "metrics.json").is_file()
    said = [line for line in err.splitlines() if "W&B" in line]
    assert len(said) == 1 and "the online start failed" in said[0], err
    (offline,) = offline_ids(run_dir)
    folder_id = (run_dir / RUN_ID_FILE).read_text().strip()
    assert offline != folder_id and f"W&B run id is {offline}" in said[0], "the failed start's id is in use"


def test_an_offline_run_says_where_it_is_and_how_to_upload_it(toy_recipe, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc
    monkeypatch.setenv("NETRC", str(tmp_path / "none"))
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb-config"))
    code, err = train_logged(toy_recipe, tmp_path, capsys)
    run_dir = run_folder(tmp_path)
    said = [line for line in err.splitlines() if "W&B" in line]
    assert code == 0 and said == [f"note: W&B logs offline (no credentials: `wandb login` to log online) to {run_dir}"
                                  f"/wandb; upload it later with: wandb sync {run_dir}/wandb/offline-run-*"], err
    assert offline_ids(run_dir), "the offline run is there"
