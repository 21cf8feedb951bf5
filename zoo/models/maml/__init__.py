"""MAML (Finn, Abbeel & Levine 2017): batched functional meta-learning (`maml`) with the `sinusoid`
(embedded) and `omniglot` (local files) task datamodules, and MAML with policy gradients
(`maml_rl`) on 2-D navigation (`nav2d`)."""

from zoo.models.maml import data, module, nav2d, nav2d_env, omniglot  # noqa: F401  (register models and datamodules)
