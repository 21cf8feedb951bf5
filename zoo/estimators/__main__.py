"""python -m zoo.estimators {compare,list}

    python -m zoo.estimators compare [--theta 0] [--draws 10000] [--seed 0] [--out runs/estimators/compare.png] [--json]
    python -m zoo.estimators list
"""

from __future__ import annotations

import json
import math

from zoo import cli
from zoo.cli import CommandLineParser, exit_status
from zoo.errors import UserError
from zoo.estimators import describe, list_estimators
from zoo.paths import check_output_file
from zoo.schema import SEED_MAX

MAX_DRAWS = 10**6  # time and memory grow with the draws: 10**7 takes minutes and gigabytes
MAX_THETA = 1e5
DEFAULT_OUT = "runs/estimators/compare.png"  # under runs/, as zoo.train's runs: the working folder stays clean


def main(argv: list[str] | None = None) -> int:
    parser = CommandLineParser(prog="python -m zoo.estimators", description=(__doc__ or "").split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    cmp = sub.add_parser("compare", help="bias and variance of estimators on problems with exact gradients")
    cmp.add_argument("--theta", type=float, default=0.0, help="theta in z ~ N(2 theta + 3, 1), -1e5 to 1e5 (default 0)")
    cmp.add_argument("--draws", type=int, default=10000,
                     help="independent estimates per estimator, 2 to 10**6 (default 10000)")
    cmp.add_argument("--seed", type=int, default=0, help=f"torch random seed, 0 to {SEED_MAX} (default 0)")
    cmp.add_argument("--out", default=DEFAULT_OUT, help=f"PNG plot path ('' for none; default {DEFAULT_OUT})")
    cmp.add_argument("--json", action="store_true", help="print JSON instead of the table")
    sub.add_parser("list", help="registered estimators, biased or not")
    args = parser.parse_args(argv)
    return exit_status(lambda: run(args))


def run(args) -> int:
    """One sub-command, its options parsed."""
    if args.command == "list":
        print("\n".join(describe(name) for name in list_estimators()))
        return 0
    if args.draws < 2:
        raise UserError(f"--draws must be >= 2 to estimate a variance, got {args.draws}")
    if args.draws > MAX_DRAWS:  # 10**11 would ask for terabytes
        raise UserError(f"--draws must be at most {MAX_DRAWS} (10**6: minutes on one CPU thread), got "
                        f"{args.draws}; the standard errors shrink as 1/sqrt(draws), 10**4 to 10**5 show "
                        "every bias")
    if not 0 <= args.seed <= SEED_MAX:  # torch.manual_seed overflows past 64 bits
        raise UserError(f"--seed must be an integer from 0 to {SEED_MAX}, got {args.seed}")
    # a nan mean is refused deep inside torch.distributions; z = 2 theta + 3 + noise is drawn in float32,
    # where 1e8 rounds the unit noise away (every score-function estimate 0) and 1e40 overflows
    if not (math.isfinite(args.theta) and abs(args.theta) <= MAX_THETA):
        raise UserError(f"--theta must be a finite number from -{MAX_THETA:g} to {MAX_THETA:g} (float32 draws "
                        f"z ~ N(2 theta + 3, 1) keep their unit noise there), got {args.theta}")
    if args.out:  # before the draws: savefig fails only after them

        check_output_file(args.out, "--out", "figure")
    import torch  # imported when used: torch

    from zoo.estimators import compare  # imported when used: torch

    torch.set_num_threads(1)
    result = compare.run(theta=args.theta, draws=args.draws, seed=args.seed)
    if args.out:
        compare.plot(result, args.out)
    if args.json:
        out = compare.strip_private(result)
        out["plot"] = args.out or None
        print(json.dumps(out, indent=1))
    else:
        print(compare.format_table(result))
        if args.out:
            print(f"plot: {args.out}")
    return 0


def console() -> None:
    """The ``zoo-estimators`` console script (pyproject.toml): what ``python -m zoo.estimators`` does."""
    cli.run(main)


if __name__ == "__main__":
    cli.run(main)
