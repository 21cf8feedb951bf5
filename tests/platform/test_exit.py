"""Every command ends with ``zoo.cli.leave``: the interpreter's ~1 s teardown is skipped, what it
would do for the command's output is not. Each case runs in a fresh interpreter (``leave`` ends it)."""

import subprocess
import sys
import textwrap

from platform_testlib import ROOT, subprocess_env


def run(code: str, tmp_path) -> subprocess.CompletedProcess:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(code))
    return subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=subprocess_env(), capture_output=True,
                          text=True, timeout=600)


def test_exit_status_output_and_exit_handlers_are_kept(tmp_path):
    proc = run("""
        import atexit, sys
        from zoo.cli import leave
        atexit.register(lambda: open("first.txt", "w").write("registered first, ran last"))
        atexit.register(lambda: open("second.txt", "w").write(str(__import__("os").path.exists("first.txt"))))
        sys.stdout.write("no newline, still buffered")
        sys.stderr.write("error text")
        leave(3)
        open("after.txt", "w").write("leave returned")
    """, tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == "no newline, still buffered" and proc.stderr == "error text"
    assert (tmp_path / "first.txt").read_text() == "registered first, ran last"
    assert (tmp_path / "second.txt").read_text() == "False", "exit handlers run last-registered first"
    assert not (tmp_path / "after.txt").exists()


def test_a_file_left_open_is_flushed_as_the_teardown_would(tmp_path):
    """A file opened and never closed, still referenced (a module's global): the teardown closes it
    and its buffer reaches the disk; os._exit alone would drop it."""
    proc = run("""
        from zoo.cli import leave
        log = open("log.txt", "w")
        log.write("line kept in the buffer\\n")
        leave(0)
    """, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "log.txt").read_text() == "line kept in the buffer\n"


def test_a_thread_still_working_is_waited_for(tmp_path):
    proc = run("""
        import threading, time
        from zoo.cli import leave
        def work():
            time.sleep(0.5)
            open("thread.txt", "w").write("finished")
        threading.Thread(target=work).start()
        leave(0)
    """, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "thread.txt").read_text() == "finished"


def test_a_command_ends_through_leave(tmp_path):
    """``python -m zoo.train`` ends by os._exit after its exit handlers: an exit handler registered
    while it runs (here through a module the command imports) runs, and nothing after them does."""
    (tmp_path / "sitecustomize.py").write_text(textwrap.dedent("""
        import atexit, os, sys
        atexit.register(lambda: open(os.path.join(os.environ["MARK_DIR"], "atexit.txt"), "w").write("ran"))
        real_exit = os._exit
        def recorded_exit(code):
            open(os.path.join(os.environ["MARK_DIR"], "os_exit.txt"), "w").write(str(code))
            real_exit(code)
        os._exit = recorded_exit
    """))
    env = subprocess_env()
    env["PYTHONPATH"] = f"{tmp_path}:{env['PYTHONPATH']}"
    env["MARK_DIR"] = str(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "zoo.train", "--list"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0 and "vae_digits" in proc.stdout, proc.stderr
    assert (tmp_path / "atexit.txt").read_text() == "ran"
    assert (tmp_path / "os_exit.txt").read_text() == "0"


def test_a_profiler_around_the_command_still_gets_its_turn(tmp_path):
    """``python -m cProfile -o FILE -m zoo.train`` (docs/skipgram.md profiles this way): cProfile writes
    its file after the command returns, so the command exits as usual there."""
    proc = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(tmp_path / "train.prof"), "-m", "zoo.train",
                           "--list"], cwd=ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and "vae_digits" in proc.stdout, proc.stderr
    import pstats

    assert pstats.Stats(str(tmp_path / "train.prof")).total_calls > 0


def test_a_program_running_the_command_through_runpy_goes_on_after_it(tmp_path):
    proc = run("""
        import runpy, sys
        sys.argv = ["zoo.train", "--list"]
        try:
            runpy.run_module("zoo.train", run_name="__main__", alter_sys=True)
        except SystemExit as exit:
            open("after.txt", "w").write(f"went on, status {exit.code}")
    """, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "after.txt").read_text() == "went on, status 0"
