"""Show, Attend and Tell: image captioning with soft and hard (sampled) attention."""

from . import data, module  # noqa: F401  (registers the 'sat' model and the 'shapes' / 'karpathy' data)
