"""`ZooModule`: the LightningModule base every zoo model derives from.

Contract (what `zoo.train`, `zoo.evaluate`, `zoo.predict` and `zoo.load` rely on):

- ``spec``: the zoo's own models point to their ``zoo.registry.ModelSpec``, declared once in the folder's
  torch-free ``config.py``; it gives ``Config``, ``monitor`` / ``monitor_mode``, ``precisions``, ``compiled``,
  ``stochastic_node``, ``run_monitor`` and ``check_run`` below (a model of a user's own may set those instead).
- ``Config``: a dataclass of the model's options (the recipe's ``model:`` section minus ``name``).
- ``__init__(self, cfg: dict, data_info: dict)``: ``cfg`` are those options as a plain dict,
  ``data_info`` is what the datamodule's ``info()`` returned (shapes, vocabulary, ...). Both are
  primitive, so checkpoints load with ``torch.load(weights_only=True)``. Read options from
  ``self.cfg`` (a ``Config`` instance).
- ``monitor`` / ``monitor_mode``: the metric the best checkpoint is chosen by.
- ``ddp_find_unused_parameters``: set True when a step trains only part of the model (GANs).
- ``test_step`` logs ``test/<metric>``; ``zoo.evaluate`` prints those.
- ``training_step`` logs its per-step diagnostics with ``self.log_train({...})``, which logs them only on
  the steps the loggers write (under ``zoo.train`` without ``self.log``: ``zoo.callbacks.train_logs``).
- ``stochastic_node``: a ``zoo.estimators.StochasticNode`` if the model samples somewhere and trains
  through an estimator; its config then has an ``estimator`` option (``estimator_option(...)``),
  checked against the node when the recipe loads, and ``self.build_estimator()`` builds it.
- the inference API: a few public methods for what the model is for (``sample``, ``caption``, ``detect``, ...;
  docs/api.md), in a mixin in the model folder's ``predict.py``: typed, documented, without gradients, outputs
  on the model's device, bad input one ``UserError`` (``zoo.core.inputs`` checks shapes and reads images).
- ``predict_cli(inputs, options)``: what ``python -m zoo.predict`` does for this model; a thin layer over the
  inference API, in ``predict.py`` too.
- ``check_data(info)`` (optional): refuse (a ``UserError`` saying which datamodules fit) a
  datamodule's ``info()`` the model cannot take: one of another kind (maml on digits), or one whose
  shapes differ from ``self.data_info``, the data the model was built for. ``__init__`` calls it, so
  ``zoo.train`` refuses a recipe pairing the two before anything is written; ``setup`` calls it on
  the datamodule Lightning runs with (``zoo.evaluate ... data.name=OTHER``).
- ``before_fit()``: work done once when ``zoo.train`` has built the model for a fresh run, before
  the run folder exists (e.g. weights taken from another model); a ``UserError`` there leaves
  nothing behind. A resumed run (its checkpoint holds the result) and loading a trained model do
  not call it.
- Figures: ``self.save_figure(name, fig)`` / ``self.save_image(name, tensor)`` write
  ``plots/<name>.png`` in the run folder and log the image to W&B / TensorBoard when active.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import warnings
from pathlib import Path
from typing import Any

import lightning as L
import matplotlib.image as mpimg
import torch
from torchvision.utils import save_image

from zoo import hf_hub
from zoo.callbacks.train_logs import train_logs
from zoo.errors import UserError
from zoo.estimators.seam import build_for_node, checked_estimator
from zoo.paths import make_folder
from zoo.registry import PRECISIONS, ModelSpec
from zoo.schema import thaw


def not_primitive(value: Any, where: str = "") -> tuple[str, str] | None:
    """(where, type name) of the first value inside ``value`` that a weights_only checkpoint cannot hold."""
    if value is None or type(value) in (bool, int, float, str) or isinstance(value, torch.Tensor):
        return None
    if type(value) in (list, tuple):
        return next((bad for i, v in enumerate(value) if (bad := not_primitive(v, f"{where}[{i}]"))), None)
    if type(value) is dict:
        return next((bad for k, v in value.items() if (bad := not_primitive(v, f"{where}[{k!r}]"))), None)
    return where, f"{type(value).__module__}.{type(value).__qualname__}"


class ZooModule(L.LightningModule):
    spec: ModelSpec | None = None  # the model's spec (its folder's config.py), which sets the four below
    Config: type = None  # dataclass of model options
    monitor: str = "val/loss"  # metric for the best checkpoint
    monitor_mode: str = "min"  # "min" or "max"
    # trainer.precision values the model runs under (tested: tests/test_recipes.py on the CPU, tests/test_gpu.py);
    # pure 16-true / bf16-true weights are refused (log-likelihoods overflow, float32 tables meet them)
    precisions: tuple = PRECISIONS
    ddp_find_unused_parameters: bool = False  # True if a training step leaves some parameters without
    # gradients (a GAN's G step leaves D's): `trainer.strategy=ddp` then runs DDP with that detection
    compiled: tuple | str | None = None  # the submodules the recipe key `compile` compiles, or why the model refuses
    # it (``zoo.registry.ModelSpec.compiled``)
    fitted_buffers: tuple = ()  # buffers the model fits on validation data (a temperature, say): state, not
    # weights, so the `ema` callback fits them on the averaged weights and never averages them

    def __init_subclass__(cls, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        spec = cls.__dict__.get("spec")
        if spec is not None:  # the class points to its spec rather than restating it
            cls.Config, cls.precisions, cls.compiled = spec.config, spec.precisions, spec.compiled
            if isinstance(spec.monitor, tuple):  # a function of the run's config: the model sets it once built
                cls.monitor, cls.monitor_mode = spec.monitor

    def __init__(self, cfg: dict | Any, data_info: dict | None = None):
        super().__init__()
        # the options object of a loaded run (zoo.runner.build: LoadedRun.model_options), taken as given; a dict
        # from a checkpoint's hyperparameters or from Python
        made = cfg if self.Config is not None and isinstance(cfg, self.Config) else None
        cfg = dataclasses.asdict(made) if made is not None else thaw(cfg)  # thaw: a read-only mapping's plain copy
        # in the checkpoint (to rebuild the model), not sent to the loggers: data_info can hold a vocabulary, slow
        # through Lightning's CSV logger (OmegaConf, node by node); runner.make_trainer logs the recipe's config
        self.save_hyperparameters({"cfg": dict(cfg), "data_info": dict(data_info or {})}, logger=False)
        for what, value in (("data_info", data_info or {}), ("the model's options", cfg)):
            bad = not_primitive(value)  # else a numpy scalar trains, then zoo.evaluate refuses the checkpoint
            if bad is not None:
                raise UserError(f"{type(self).__name__}: {what}{bad[0]} is a {bad[1]}; checkpoints hold str, int, "
                                "float, bool, None, lists, dicts and tensors only (they load with weights_only=True): "
                                "convert it where it is made (e.g. float(x) in the datamodule's info())")
        if self.Config is None:
            raise UserError(f"{type(self).__name__} sets no Config: a ZooModule names the dataclass of its options "
                            "(Config = MyConfig; docs/adding_a_model.md)")
        # the options' rules live in the Config's fields, checked when the recipe loads (zoo.config); not again here:
        # a checkpoint holds options valid when it was trained, which a later rule must not lock out
        self.cfg = made if made is not None else self.Config(**cfg)
        self.data_info = dict(data_info or {})
        self.plots_dir: Path | None = None  # set by zoo.train / zoo.evaluate

    def __setattr__(self, name: str, value: Any) -> None:
        # Lightning sets the name of the hook it runs around each hook (~40 times a training step); a str or None is
        # never a parameter, module or buffer, so nn.Module's checks of the value (~2 us a time) are passed over
        if name == "_current_fx_name":
            object.__setattr__(self, name, value)
        else:
            super().__setattr__(name, value)

    @classmethod
    def check_run(cls, cfg: dict) -> None:
        """The whole validated recipe (model, data, trainer) before anything is built: settings that are
        each valid but together meaningless (SeqGAN's schedule with every phase 0). The spec's, else nothing."""
        if cls.spec is not None and cls.spec.check_run is not None:
            cls.spec.check_run(cfg)

    @classmethod
    def run_monitor(cls, cfg: dict) -> tuple[str, str] | None:
        """(monitor, monitor_mode) a model built from the validated recipe ``cfg`` will have, known before it
        is built (for the checks of checkpoint.mode and early stopping), or None where it depends on the data."""
        return cls.spec.run_monitor(cfg) if cls.spec is not None else (cls.monitor, cls.monitor_mode)

    def before_fit(self) -> None:
        """See the module docstring; nothing by default."""

    def attached_datamodule(self) -> Any:
        """The datamodule of the trainer running this model, or None (no trainer, or bare dataloaders)."""
        return getattr(self.trainer, "datamodule", None) if self._trainer is not None else None

    def setup(self, stage: str) -> None:
        """Lightning's hook before fit / validate / test: the model's ``check_data``, if it has one, on
        the datamodule it is about to run with."""
        dm = self.attached_datamodule()
        if hasattr(self, "check_data") and hasattr(dm, "info"):
            self.check_data(dm.info())

    @classmethod
    def stochastic_node(cls, cfg: Any, data_info: dict | None = None) -> Any:
        """Where the model samples, stated from its validated options ``cfg`` (its ``Config``) and, once the
        data are read, ``data_info``: a ``zoo.estimators.StochasticNode`` whose estimator is the option
        ``estimator``; None where it samples nowhere (with these options). The spec's ``node``."""
        if cls.spec is None or cls.spec.node is None:
            return None
        return cls.spec.node(cfg, data_info)

    def build_estimator(self) -> Any:
        """The estimator the config names (``model.estimator``) for the model's node, given the node's context
        size (see ``zoo.estimators.seam``); checked against the node here unless ``zoo.config`` checked it when
        the recipe loaded (options made by ``load_config``: ``checked_estimator``)."""
        spec = self.cfg.estimator
        if spec is None:  # None in a checkpoint: the model's default
            spec = self.Config().estimator
        return build_for_node(spec, self.stochastic_node(self.cfg, self.data_info), where="model.estimator",
                              model=type(self).__name__, checked=checked_estimator(self.cfg, spec))

    # ---- logging ---------------------------------------------------------------------------
    def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
        """Lightning writes every step-only value logged earlier in the epoch again at each later logging step
        (its result collection keeps them until the epoch ends): a value logged on some steps only (SeqGAN's G
        step, once an epoch) would be repeated, stale, on the steps after it, while a run resumed mid-epoch, whose
        collection starts empty, writes no such rows. Those values are dropped before each step; a subclass that
        overrides this hook calls ``super().on_train_batch_start(batch, batch_idx)``."""
        results = getattr(self._trainer, "_results", None) if self._trainer is not None else None
        for result in results.values() if results is not None else ():
            if result.meta.on_step and not result.meta.on_epoch:
                result.has_reset = True  # Lightning's "not logged since": left out until logged again

    def log_train(self, metrics: dict[str, Any], batch_size: int | None = None, prog_bar: tuple = ()) -> None:
        """Log training-step values, but only on the steps the loggers write (every
        ``trainer.log_every_n_steps``; every step under ``fast_dev_run``), as ``self.log`` would for that
        step only: under ``zoo.train`` through ``zoo.callbacks.train_logs.TrainLogs``, which writes the same
        rows and metrics without ``self.log``'s ~0.5 ms a value (``benchmarks/overhead.py``). The values are
        those of the logged step, not means over the skipped ones."""
        if not self.should_log_step():
            return
        sink = train_logs(self._trainer)  # zoo.train's: the values reach the loggers without self.log
        if sink is not None:
            sink.add(self._trainer, metrics, prog_bar, self.device)
            return
        for name, value in metrics.items():
            self.log(name, value, batch_size=batch_size, prog_bar=name in prog_bar)

    def world(self) -> tuple[int, int]:
        """(world size, rank) of the current run; (1, 0) outside a Trainer or in one process."""
        if self._trainer is None or self.trainer.world_size == 1:
            return 1, 0
        return self.trainer.world_size, self.global_rank

    def should_log_step(self) -> bool:
        """True on the training steps whose logged values reach the loggers."""
        trainer = self._trainer
        if trainer is None or trainer.fast_dev_run:
            return True
        # Lightning's own test (private, so fall back to logging every step if it moves)
        return bool(getattr(getattr(trainer, "_logger_connector", None), "should_update_logs", True))

    # ---- figures -------------------------------------------------------------------------
    def _plots_dir(self) -> Path:
        if self.plots_dir is None:  # outside `zoo.train`: beside Lightning's logs, like lightning_logs/
            env = os.environ.get("ZOO_RUN_DIR")
            root = env or (self.trainer.default_root_dir if self._trainer is not None else os.getcwd())
            self.plots_dir = Path(root) / "plots"

        return make_folder(self.plots_dir, instead="choose another plots_dir=")

    def save_figure(self, name: str, fig: Any) -> Path | None:
        """Save a matplotlib figure as plots/<name>.png (rank 0 only) and log it; closes the figure (one made
        through pyplot: the zoo's own figures are plain ``matplotlib.figure.Figure`` objects, which need no closing)."""
        path = None
        if self._trainer is None or self.trainer.is_global_zero:
            path = self._plots_dir() / f"{name}.png"
            with warnings.catch_warnings():  # a glyph the font lacks (CJK) is drawn as a box, even under -W error
                warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from")
                fig.savefig(path, dpi=110, bbox_inches="tight")
            self._log_png(name, path)
        pyplot = sys.modules.get("matplotlib.pyplot")  # loaded if the figure came from it
        if pyplot is not None:
            pyplot.close(fig)
        return path

    def save_image(self, name: str, images: torch.Tensor, nrow: int = 8, **grid_kwargs: Any) -> Path | None:
        """Save a batch of images (N, C, H, W) in [0, 1] as a grid plots/<name>.png and log it."""
        if self._trainer is not None and not self.trainer.is_global_zero:
            return None
        path = self._plots_dir() / f"{name}.png"
        save_image(images.detach().float().cpu(), path, nrow=nrow, **grid_kwargs)
        self._log_png(name, path)
        return path

    def _log_png(self, name: str, path: Path) -> None:
        if self._trainer is None:
            return
        step = self.global_step
        for logger in self.trainer.loggers:
            kind = type(logger).__name__
            if kind == "WandbLogger":
                logger.log_image(key=f"plots/{name}", images=[str(path)], step=step)
            elif kind == "TensorBoardLogger":
                img = torch.from_numpy(mpimg.imread(str(path))[..., :3].copy()).permute(2, 0, 1)
                logger.experiment.add_image(f"plots/{name}", img, global_step=step)

    # ---- command-line inference ------------------------------------------------------------
    def predict_cli(self, inputs: list[str], options: dict) -> None:
        raise UserError(f"model '{type(self).__name__}' has no `zoo.predict` behaviour")

    # ---- the Hugging Face Hub (zoo.hf_hub) --------------------------------------------------------
    def save_pretrained(self, folder: str | Path, name: str | None = None) -> Path:
        """Write the model into ``folder``: ``model.safetensors`` (weights), ``config.json`` (the zoo's card,
        with the weights' sha256) and ``README.md`` (the Hub's model card, metrics as evaluation results).
        ``name``: the name on the card (default: the released entry's, else the model's)."""
        return hf_hub.save_pretrained(self, folder, name)

    def push_to_hub(self, repo_id: str, private: bool | None = None, token: str | None = None,
                    commit_message: str = "Upload a zoo model") -> str:
        """Upload the model to the Hub repository ``repo_id`` (``owner/name``, made if missing; ``hf auth
        login`` or ``token``); ``zoo.load("hf://owner/name")`` loads it back. The URL of the commit."""
        return hf_hub.push_to_hub(self, repo_id, private=private, token=token, commit_message=commit_message)

    @classmethod
    def from_pretrained(cls, folder_or_repo: str | Path, revision: str | None = None,
                        trust_code: bool = False) -> ZooModule:
        """The model saved in a folder by ``save_pretrained``, or in a Hub repository ``owner/name`` (downloaded
        into huggingface_hub's cache; from the cache when offline), in eval mode on the CPU. On a model class
        (``LatentVAE.from_pretrained``) a folder of another model is refused. ``trust_code``: import the modules
        its config.json names by dotted path (else refused, as the Hub's ``trust_remote_code``)."""
        return hf_hub.from_pretrained(folder_or_repo, revision, expected=None if cls is ZooModule else cls,
                                  trust_code=trust_code)
