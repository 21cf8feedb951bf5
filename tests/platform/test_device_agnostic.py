"""Every tensor the zoo makes follows the device of its inputs or module (a window offset built
on the CPU fails next to CUDA tokens).

A CPU machine cannot run CUDA, so three checks stand in for it:
- a source scan: every ``torch.arange/zeros/ones/empty/full/rand*/tensor/eye/linspace`` call and
  every ``torch.Generator()`` in zoo/ and benchmarks/ passes ``device=``, or says on its line why it
  belongs on the CPU (``# cpu: <reason>``), or sits in a CPU file (a model folder's ``data.py`` and ``plots.py``:
  data pipelines, whose batches Lightning moves to the device, and plotting; any other file with a line
  ``# cpu file: <reason>``), or is the value of a
  parameter or buffer (``nn.Parameter(...)``, ``register_buffer(...)``: they move with their module);
- runs in float64 (skip-gram's hand-written updates, each model's stochastic loss and gradient):
  a tensor made with a fixed dtype either breaks them or shows up as a float32 result;
- and, in test_meta_device.py, every recipe's training step on the ``meta`` device, where a tensor
  made on the CPU in the path is refused however it was made.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
FACTORIES = {"arange", "zeros", "ones", "empty", "full", "rand", "randn", "randint", "randperm", "tensor",
             "eye", "linspace", "logspace", "Generator", "bernoulli_", "normal", "tril_indices", "triu_indices",
             "scalar_tensor", "empty_strided"}
MODULE_STATE = {"Parameter", "register_buffer", "Buffer"}  # values that move with their module
# a model folder's datamodules and figures, whose tensors are made on the CPU (Lightning moves the batches)
CPU_BY_SHAPE = ("data.py", "plots.py")
CPU_FILE = "# cpu file:"  # a line that marks any other file whose tensors are made on the CPU, with the reason


def cpu_file(path: Path) -> bool:
    """Whether ``path`` makes its tensors on the CPU on purpose: a model folder's ``data.py`` or ``plots.py`` (the
    shape every model folder has), or a file with a line ``# cpu file: <reason>``."""
    in_model = path.parent.parent == ROOT / "zoo" / "models"
    by_shape = in_model and path.name in CPU_BY_SHAPE
    return by_shape or any(line.startswith(CPU_FILE) for line in path.read_text().splitlines())


def factory_calls_without_device(path: Path) -> list[str]:
    """'file:line: call' for each factory call with neither ``device=`` nor a ``# cpu:`` note."""
    source = path.read_text()
    lines = source.splitlines()
    found = []
    tree = ast.parse(source)
    # parameters and buffers move with their module (.to / Lightning); any other tensor, also one
    # made in an __init__ and kept as a plain attribute, stays where it was made
    module_state = {id(n) for call in ast.walk(tree) if isinstance(call, ast.Call)
                    and getattr(call.func, "attr", getattr(call.func, "id", None)) in MODULE_STATE
                    for arg in [*call.args, *(k.value for k in call.keywords)] for n in ast.walk(arg)}
    for node in ast.walk(tree):
        if id(node) in module_state:
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
    files = [f for folder in ("zoo", "benchmarks", "studies") for f in sorted((ROOT / folder).rglob("*.py"))]
    assert len(files) > 50
    offenders = [hit for f in files if not cpu_file(f) for hit in factory_calls_without_device(f)]
    assert not offenders, ("tensors made without device= (pass device=<input>.device, use x.new_*, or add "
                           "'# cpu: <why>' if the CPU is meant):\n" + "\n".join(offenders))


def test_the_scan_catches_a_cpu_tensor(tmp_path: Path):
    """The scan itself can fail: the skip-gram bug of issue 13, written out again, and a table kept
    as a plain attribute (it does not move with a module); parameters and buffers pass."""
    bad = ROOT / "zoo" / "_scan_probe.py"
    try:
        bad.write_text("import torch\n\ndef offsets(b):\n    return torch.cat([torch.arange(-b, 0), "
                       "torch.arange(1, b + 1, device='cpu')])\n\n\n"
                       "class Sampler(torch.nn.Module):\n    def __init__(self, n):\n"
                       "        self.table = torch.arange(n)\n"
                       "        self.w = torch.nn.Parameter(torch.zeros(n))\n"
                       "        self.register_buffer('b', torch.ones(n))\n")
        hits = factory_calls_without_device(bad)
    finally:
        bad.unlink()
    assert sorted(hit.split(":")[1] for hit in hits) == ["4", "9"], hits


def test_cpu_files_are_a_model_folders_data_and_plots_and_the_marked_ones():
    """A model folder's own files say which make their tensors on the CPU (no list outside it to edit): its
    datamodules and figures by their names, any other file by a marked line; the rest of the folder is scanned."""
    models = ROOT / "zoo" / "models"
    assert cpu_file(models / "vae" / "data.py") and cpu_file(models / "ood" / "plots.py")
    assert cpu_file(models / "ood" / "readers.py") and cpu_file(ROOT / "zoo" / "core" / "data.py")  # marked
    assert not cpu_file(models / "vae" / "module.py") and not cpu_file(ROOT / "zoo" / "core" / "module.py")
    marked = [p for p in sorted((ROOT / "zoo").rglob("*.py")) if cpu_file(p) and p.name not in CPU_BY_SHAPE]
    assert len(marked) >= 6, marked


def _to_double(x):
    if isinstance(x, torch.Tensor):
        return x.double() if x.is_floating_point() else x
    if isinstance(x, dict):
        return {k: _to_double(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_to_double(v) for v in x)
    return x


def test_skipgram_updates_follow_the_tables_dtype():
    """float64 tables stay float64 through every objective's hand-written update (a tensor made in
    float32 would be refused by index_add_ or silently round the update)."""
    from zoo.models.skipgram.loop import train_chunk
    from zoo.models.skipgram.nets import SkipGram

    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 50, (600,), generator=g)
    sentence = torch.cumsum(torch.rand(600, generator=g) < 0.05, 0)
    window = torch.randint(1, 6, (600,), generator=g)
    for objective in ("negative_sampling", "nce", "full_softmax"):
        net = SkipGram(torch.full((50,), 10), dim=8, objective=objective, step_cap=True).double()
        before = net.centre.detach().clone()
        stats = train_chunk(net, tokens, sentence, window, 5, 0.01, 0.001, batch_centres=300, seed=0)
        assert net.centre.dtype == net.context.dtype == torch.float64 and stats["pairs"] > 0
        assert not torch.equal(net.centre, before)


@pytest.mark.parametrize("recipe, overrides", [("vae_digits", []), ("dvae_digits_reinforce", []),
                                               ("sat_shapes_hard", ["data.n_train=32", "data.n_val=8"]),
                                               ("seqgan_oracle_small", ["data.vocab_size=50"])])
def test_models_follow_float64(recipe, overrides):
    """A model cast to float64 computes its stochastic loss and gradients in float64: no tensor in
    the path is made with a fixed dtype."""
    from zoo.config import load_config
    from zoo.train import build

    torch.manual_seed(0)
    datamodule, model = build(load_config(recipe, overrides))
    model = model.double()
    model.log = model.log_dict = lambda *a, **k: None
    batch = _to_double(next(iter(datamodule.train_dataloader())))
    loss = model.estimator_loss(batch)
    assert loss.dtype == torch.float64
    params = [p for p in model.estimator_parameters() if p.requires_grad]
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    assert any(gr is not None for gr in grads)
    assert all(gr.dtype == torch.float64 for gr in grads if gr is not None)


def test_every_benchmark_takes_device_and_records_it():
    """benchmarks/*.py and studies/*.py: a --device option (benchmarks/common/devices.py) and the device in the JSON.
    A benchmark is a script (``if __name__ == "__main__":``) that imports torch, a model or a shared helper
    (benchmarks/common/); the helpers are not, nor a script that only joins records."""
    scripts = [p for folder in ("benchmarks", "studies") for p in sorted((ROOT / folder).glob("*.py"))
               if '__name__ == "__main__"' in p.read_text()]
    assert len(scripts) >= 6
    for path in scripts:
        source = path.read_text()
        # a record written by a helper the script calls (recipe_seeds.py: benchmarks/common/seeds.py) counts
        source += "".join((ROOT / "benchmarks" / "common" / f"{name}.py").read_text()
                          for name in re.findall(r"^from benchmarks\.common\.(\w+) import", source, re.M))
        if not re.search(r"torch|zoo\.train|zoo\.models|benchmarks\.common\.", source):
            continue  # joins records others made (studies/ood_joint_seeds.py): runs nothing on a device
        takes_option = "add_device_option(" in source or '"--device"' in source
        assert "resolve_device(" in source and takes_option, \
            f"{path.name}: no --device (use benchmarks/common/devices.py)"
        assert '"device": str(' in source or '"device": args.device' in source, f"{path.name}: device not in the JSON"


def test_device_option_refuses_an_absent_gpu():
    from benchmarks.common.devices import accelerator, resolve_device

    assert resolve_device("cpu") == torch.device("cpu") and accelerator(torch.device("cpu")) == ("cpu", 1)
    assert accelerator(torch.device("cuda:1")) == ("gpu", [1])
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit, match="CUDA is not available"):
            resolve_device("cuda")
