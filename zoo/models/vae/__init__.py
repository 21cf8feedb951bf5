"""Variational autoencoders: Gaussian (`vae`) and discrete N x K categorical (`dvae`), with the
`digits` (embedded, scikit-learn) and `mnist` (local IDX files) datamodules."""

from zoo.models.vae import data, dvae, vae  # noqa: F401  (register models and datamodules)
