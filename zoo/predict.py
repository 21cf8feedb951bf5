"""python -m zoo.predict TARGET [inputs ...] [key=value ...]

Inference with a trained model (a checkpoint path or a pretrained name). What inputs mean and
what comes out is the model's: image files to caption, words to look up, nothing for a
generator that samples. Examples:

  python -m zoo.predict vae-digits n=64 out=samples.png
  python -m zoo.predict sat-shapes-soft scene.png beam=3
  python -m zoo.predict seqgan-oracle-small n=5
"""

from __future__ import annotations

import sys

from zoo.errors import UserError


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    try:
        import torch

        from zoo.evaluate import parse_kv
        from zoo.hub import load_any

        target, rest = argv[0], argv[1:]
        options = parse_kv([a for a in rest if "=" in a])
        inputs = [a for a in rest if "=" not in a]
        model, _ = load_any(target)
        with torch.inference_mode():
            model.predict_cli(inputs, options)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
