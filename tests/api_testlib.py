"""Helpers of the inference-API tests: the datamodule a loaded model was trained with."""

from typing import Any


def model_datamodule(model: Any, stage: str = "test") -> Any:
    """The datamodule of ``model.run_info['data']`` (what zoo.load keeps), set up for ``stage``."""
    from zoo.registry import DATAMODULES
    from zoo.schema import validate

    data = dict(model.run_info["data"])
    entry = DATAMODULES.entry(data.pop("name"))
    dm = entry.obj(validate(entry.config, data, "data") if entry.config else data)
    dm.prepare_data()
    dm.setup(stage)
    return dm
