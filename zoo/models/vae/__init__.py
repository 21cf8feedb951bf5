"""Variational autoencoders: Gaussian (`vae`) and discrete N x K categorical (`dvae`), with the
`digits` (embedded, scikit-learn) and `mnist` (local IDX files) datamodules."""
