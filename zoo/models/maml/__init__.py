"""MAML (Finn, Abbeel & Levine 2017): batched functional meta-learning (`maml`) with the `sinusoid`
(embedded) and `omniglot` (local files) task datamodules, and MAML with policy gradients
(`maml_rl`) on 2-D navigation (`nav2d`)."""
