"""Command line: ``python -m accelkit {run,doctor,roofline}``."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    """Run the accelkit command line; returns the exit status."""
    parser = argparse.ArgumentParser(prog="accelkit", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="execute every notebook headless into a build folder")
    run.add_argument("--notebooks", default="notebooks")
    run.add_argument("--out", default="build")
    run.add_argument("--profile", default=None, help="ci, full or auto (default: $ACCELKIT_PROFILE or auto)")
    run.add_argument("--only", nargs="*", help="run only notebooks whose name contains these")
    sub.add_parser("doctor", help="print the hardware card and which notebooks this machine can run fully")
    sub.add_parser("roofline", help="measure and print this machine's roofline")
    args = parser.parse_args(argv)

    if args.cmd == "run":
        import os

        from accelkit import runner

        summary = runner.run_all(args.notebooks, args.out,
                                 profile=args.profile or os.environ.get("ACCELKIT_PROFILE", "auto"),
                                 only=args.only)
        print(f"wrote {args.out}/summary.md and {args.out}/results.json")
        return 0 if all(n["status"] in ("ok", "skipped") for n in summary["notebooks"].values()) else 1
    if args.cmd == "doctor":
        from accelkit import env

        print(env.doctor())
        return 0
    if args.cmd == "roofline":
        from accelkit import roofline

        print(roofline.report())
        return 0
    return 2  # pragma: no cover


if __name__ == "__main__":
    sys.exit(main())
