"""Released weights: ``<name>.safetensors`` + ``<name>.json`` (the card). See `zoo.loading`."""
