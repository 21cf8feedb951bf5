"""The options every datamodule shares (``root``, ``seed``, ``num_workers``, and ``batch_size`` where the
loaders batch examples) are declared once, in ``zoo.data_schema``; each datamodule keeps its own defaults.
Torch-free: the option dataclasses only."""

import dataclasses

import pytest

from zoo.data_schema import BatchedDataOptions, DataOptions
from zoo.errors import UserError
from zoo.registry import DATAMODULES
from zoo.schema import validate

# the shared fields' defaults of every built-in datamodule, as they were when each declared its own
SHARED_DEFAULTS = {  # name -> (root, seed, num_workers, batch_size or None: takes no batch_size)
    "digits": ("data", 0, 0, 64),
    "mnist": ("data", 0, 0, 100),
    "shapes": ("data", 0, 0, 64),
    "karpathy": ("data", 0, 2, 32),
    "sinusoid": ("data", 0, 0, None),
    "omniglot": ("data", 0, 0, None),
    "nav2d": ("data", 0, 0, None),
    "ood_digits": ("data", 0, 0, 64),
    "ood_toy2d": ("data", 0, 0, 128),
    "ood_images": ("data", 0, 0, 64),
    "seqgan_oracle": ("data", 0, 0, 64),
    "seqgan_text": ("data", 0, 0, 64),
    "skipgram_synthetic": ("data", 0, 0, None),
    "skipgram_text": ("data", 0, 0, None),
}


def builtin_datamodules() -> dict[str, type]:
    return {name: DATAMODULES.builtin_config(name) for name in DATAMODULES.list()
            if DATAMODULES.builtin_config(name) is not None}


def test_every_builtin_datamodule_extends_the_shared_options_with_its_own_defaults():
    configs = builtin_datamodules()
    assert set(configs) == set(SHARED_DEFAULTS)
    for name, config in configs.items():
        root, seed, num_workers, batch_size = SHARED_DEFAULTS[name]
        assert issubclass(config, DataOptions), name
        assert issubclass(config, BatchedDataOptions) == (batch_size is not None), name
        got = validate(config, {}, name)
        assert (got["root"], got["seed"], got["num_workers"], got.get("batch_size")) == \
            (root, seed, num_workers, batch_size), name
        shared = [f.name for f in dataclasses.fields(config)][:4 if batch_size is not None else 3]
        assert shared == ["root", "seed", "num_workers", "batch_size"][:len(shared)], name


@pytest.mark.parametrize("name", sorted(SHARED_DEFAULTS))
def test_every_datamodule_takes_root_and_checks_the_shared_fields(name):
    config = builtin_datamodules()[name]
    assert validate(config, {"root": "elsewhere", "seed": 7}, name)["root"] == "elsewhere"  # generated data too
    for key, value, expected in [("root", "", "must not be empty"), ("seed", -1, "must be an integer from 0 to"),
                                 ("num_workers", 10**6, "must be <= "), ("num_workers", 1.5, "must be an integer")]:
        with pytest.raises(UserError, match=f"'{key}' in {name} {expected}"):
            validate(config, {key: value}, name)
    if issubclass(config, BatchedDataOptions):
        with pytest.raises(UserError, match=f"'batch_size' in {name} must be > 0"):
            validate(config, {"batch_size": 0}, name)
    else:  # a batch size these loaders do not read is refused, not ignored
        with pytest.raises(UserError, match="unknown key 'batch_size'"):
            validate(config, {"batch_size": 8}, name)
