"""Show, Attend and Tell: image captioning with soft and hard (sampled) attention."""

MODULES = ("data", "module")  # register the 'sat' model and the 'shapes' / 'karpathy' data (zoo.models.import_all)
