"""Show, Attend and Tell: image captioning with soft and hard (sampled) attention."""
