"""Variational autoencoders: Gaussian (`vae`) and discrete N x K categorical (`dvae`), with the
`digits` (embedded, scikit-learn) and `mnist` (local IDX files) datamodules."""

MODULES = ("data", "dvae", "vae")  # register the models and datamodules (zoo.models.import_all)
