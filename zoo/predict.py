"""python -m zoo.predict TARGET [inputs ...] [key=value ...]

Inference with a trained model (a checkpoint path or a pretrained name). What inputs mean and
what comes out is the model's: image files to caption, words to look up, nothing for a
generator that samples. Examples:

  python -m zoo.predict vae-digits n=64 out=samples.png
  python -m zoo.predict sat-shapes-soft scene.png beam=3
  python -m zoo.predict seqgan-oracle-small n=5

--trust-code imports the modules a checkpoint or model folder names by dotted path (its author's code;
refused without it).
"""

from __future__ import annotations

import argparse
import sys

from zoo import cli
from zoo.cli import CommandLineParser, exit_status
from zoo.loading import load_any, locate
from zoo.schema import parse_kv

TRUST_CODE = "--trust-code"


def main(argv: list[str] | None = None) -> int:
    parser = CommandLineParser(prog="python -m zoo.predict", description=(__doc__ or "").split("\n")[0],
                               formatter_class=argparse.RawDescriptionHelpFormatter,
                               epilog=(__doc__ or "").split("\n\n", 1)[-1])
    parser.add_argument("target", help="a checkpoint path or a pretrained name")
    parser.add_argument("args", nargs="*", metavar="input | key=value",
                        help="the model's inputs (files, words) and options")
    parser.add_argument("--trust-code", action="store_true",
                        help="import the modules the checkpoint or model folder names by dotted path "
                        "(its author's code)")
    argv = sys.argv[1:] if argv is None else argv
    trust_code = TRUST_CODE in argv
    argv = [a for a in argv if a != TRUST_CODE]
    try:  # inputs may start with '-' (a point "-4,1.5"): only -h/--help and --trust-code are flags here
        args = parser.parse_args(argv if {"-h", "--help"} & set(argv) else ["--", *argv])
    except SystemExit as exit:  # argparse: --help (0) or a usage error (2, message printed)
        return int(exit.code or 0)

    def run() -> int:
        locate(args.target)  # a mistyped name or path: answered before torch is imported
        import torch  # imported when used: torch

        options = parse_kv([a for a in args.args if "=" in a])
        inputs = [a for a in args.args if "=" not in a]
        model, _ = load_any(args.target, trust_code)
        with torch.inference_mode():
            model.predict_cli(inputs, options)
        return 0

    return exit_status(run)


def console() -> None:
    """The ``zoo-predict`` console script (pyproject.toml): what ``python -m zoo.predict`` does."""
    cli.run(main)


if __name__ == "__main__":
    cli.run(main)
