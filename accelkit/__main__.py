"""Command line: ``python -m accelkit {doctor,roofline}``, the learner's commands.

The work is done by :mod:`accelkit.env` (doctor) and :mod:`accelkit.roofline`.  The
maintainers' commands are in ``tools/``: ``run_notebooks.py`` (``make run``), ``verify.py``
(``make verify``) and ``compare.py`` (``make compare``).
"""

from __future__ import annotations

import argparse
import sys

from accelkit import config

_PROFILE_HELP = f"ci, full or auto (default: ${config.PROFILE_ENV} or auto)"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="accelkit", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    doc = sub.add_parser("doctor", help="print the hardware card and which notebooks this machine "
                         "can run fully, or (--hardware NAME) the decisions for a hardware class")
    doc.add_argument("--hardware", default=None, metavar="NAME",
                     help="a hardware class (t4, a100, h200, cpu-avx2, tpu-v5e ...) or 'list'; "
                     "nothing is probed")
    doc.add_argument("--notebooks", default=None,
                     help="the notebooks whose requirements are checked (default: ./notebooks)")
    roof = sub.add_parser("roofline", help="measure and print this machine's roofline")
    roof.add_argument("--profile", default=None, help=_PROFILE_HELP)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the accelkit command line; returns the exit status (0 ok, 2 usage)."""
    args = _parser().parse_args(argv)
    if args.cmd == "doctor":
        from accelkit import env

        try:
            print(env.doctor(args.hardware, args.notebooks))
        except KeyError as exc:
            print(f"accelkit doctor: {exc.args[0]}", file=sys.stderr)
            return 2
        return 0
    profile = config.profile(args.profile)
    if args.cmd == "roofline":
        from accelkit import roofline

        print(roofline.report(profile=profile))
        return 0
    return 2  # pragma: no cover


if __name__ == "__main__":
    sys.exit(main())
