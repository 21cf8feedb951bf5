"""A mistyped pretrained name or checkpoint path is answered before torch is imported, by ``zoo.evaluate``,
``zoo.predict`` and ``zoo.pretrained export`` (as a recipe's mistakes are by ``zoo.train``): one process
answers them all, each with exit status 2 and its message, and imports neither torch nor Lightning."""

from platform_testlib import heavy_modules_imported_by


def test_mistyped_names_and_paths_are_answered_without_torch(tmp_path):
    (tmp_path / "empty.ckpt").write_bytes(b"")
    (tmp_path / "run").mkdir()
    cases = [  # (command module, argv, part of the message)
        ("zoo.evaluate", ["vae-digitz"], "unknown pretrained model 'vae-digitz' (did you mean: vae-digits"),
        ("zoo.evaluate", [str(tmp_path / "last.ckpt")], "checkpoint not found"),
        ("zoo.evaluate", [str(tmp_path / "empty.ckpt"), "--json"], "not a PyTorch file (it is empty)"),
        ("zoo.evaluate", [str(tmp_path / "run")], "is a folder, not a checkpoint"),
        ("zoo.evaluate", ["runs/vae/last"], "no such file"),
        ("zoo.predict", ["sat-shapes-sfot", "scene.png"], "unknown pretrained model 'sat-shapes-sfot'"),
        ("zoo.predict", [str(tmp_path / "last.ckpt"), "n=4"], "checkpoint not found"),
        ("zoo.pretrained.__main__", ["export", str(tmp_path / "last.ckpt"), "--name", "mine",
                                    "--out", str(tmp_path / "out")], "checkpoint not found"),
    ]
    code = ("import contextlib, importlib, io, sys\n"
            f"for module, argv, expected in {cases!r}:\n"
            "    out = io.StringIO()\n"
            "    with contextlib.redirect_stderr(out), contextlib.redirect_stdout(out):\n"
            "        status = importlib.import_module(module).main(argv)\n"
            "    assert status == 2 and expected in out.getvalue(), (module, argv, status, out.getvalue())\n")
    assert heavy_modules_imported_by(code) == []
    assert not (tmp_path / "out").exists()  # export made no folder for a checkpoint that is not there
