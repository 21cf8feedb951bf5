"""MAML (Finn, Abbeel & Levine 2017): batched functional meta-learning (`maml`) with the `sinusoid`
(embedded) and `omniglot` (local files) task datamodules."""

from zoo.models.maml import data, module, omniglot  # noqa: F401  (register models and datamodules)
