"""Every ```python block of docs/api.md runs as it is, each in a fresh namespace (they are self-contained)."""

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```", DOC.read_text(), flags=re.S | re.M)


def test_the_page_has_a_block_per_model():
    for name, call in (("vae-digits", ".log_likelihood("), ("sat-shapes-soft", ".caption("),
                       ("seqgan-oracle-small", ".nll("), ("skipgram-synthetic", ".most_similar("),
                       ("ood-digits-joint", ".detect("), ("maml-sinusoid", ".adapt(")):
        assert any(f'zoo.load("{name}")' in block and call in block for block in BLOCKS), name


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_block_runs(block, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    exec(compile(block, f"{DOC}:block", "exec"), {"__name__": "__docs__"})
    assert capsys.readouterr().out.strip()  # every block prints what it shows
