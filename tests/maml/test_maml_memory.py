"""A meta-batch larger than the machine's memory is refused before the run starts (on the CPU the
kernel would kill the process minutes into its first step: no message, a half-made run folder)."""

import pytest
from tiny_omniglot import omniglot_overrides

from zoo.core.memory import machine_bytes
from zoo.train import main


@pytest.mark.parametrize("recipe, task_bytes", [("maml_sinusoid", 30_000), ("maml_nav2d", 8_000_000)])
def test_a_meta_batch_beyond_the_machine_is_refused_before_the_run(recipe, task_bytes, tmp_path, capsys):
    tasks = int(4 * machine_bytes() / task_bytes)  # 4x the machine's memory (a step's peak per task, measured)
    code = main([f"recipe={recipe}", f"run_dir={tmp_path}/runs", f"data.meta_batch={tasks}",
                 "trainer.accelerator=cpu"])  # the check is the CPU's: a GPU's allocator refuses at once
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "out of memory: one training step needs about" in err and f"lower data.meta_batch={tasks}" in err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("recipe", ["maml_sinusoid", "maml_omniglot_5w1s"])
def test_step_bytes_grow_with_the_tasks(recipe, tmp_path):
    from zoo.config import load_config
    from zoo.train import build

    extra = omniglot_overrides(tmp_path) if "omniglot" in recipe else []
    sizes = []
    for tasks in (10, 1000):
        datamodule, model = build(load_config(recipe, [*extra, f"data.meta_batch={tasks}"]))
        need, lower = model.step_bytes(datamodule)
        assert f"data.meta_batch={tasks}" in lower
        sizes.append(need)
    # an estimate (a storage freed and made again at the same address counts once): within 25 %
    assert 0 < sizes[0] and sizes[1] == pytest.approx(100 * sizes[0], rel=0.25)


def test_measuring_a_step_leaves_torchs_rng_as_it_was(tmp_path):
    """MAML-RL's measured rollouts draw their action noise from torch's CPU RNG: a CPU run that is
    measured must train on the same stream as one that is not (a GPU run, or the records)."""
    import torch

    from zoo.config import load_config
    from zoo.train import build

    datamodule, model = build(load_config("maml_nav2d", ["data.meta_batch=4"]))
    before = torch.get_rng_state()
    need, _ = model.step_bytes(datamodule)
    assert need > 0
    assert torch.equal(torch.get_rng_state(), before)


def test_a_models_own_probe_calibration_decides_the_refusal():
    """A model whose probe counts more over its real peak than the default assumes (MAML-RL: 3.2) says so:
    a step the default would refuse at 1.1x the machine fits once divided by the model's own factor."""
    from zoo.core.memory import CREATED_OVER_PEAK, check_step_fits
    from zoo.errors import UserError

    class Probe:
        def step_bytes(self, datamodule):
            return int(1.1 * CREATED_OVER_PEAK * machine_bytes()), "data.meta_batch=..."

    with pytest.raises(UserError, match="out of memory"):
        check_step_fits(Probe(), None, "cpu")
    Probe.created_over_peak = 1.2 * CREATED_OVER_PEAK
    check_step_fits(Probe(), None, "cpu")
