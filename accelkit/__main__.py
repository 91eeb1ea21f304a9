"""Command line: ``python -m accelkit {run,doctor,roofline,verify,compare}``.

Owns argument parsing and resolving the size profile once for each command; the work is done
by :mod:`accelkit.runner` (run), :mod:`accelkit.course` (doctor), :mod:`accelkit.roofline`,
:mod:`accelkit.verify` and :mod:`accelkit.compare`.
"""

from __future__ import annotations

import argparse
import sys

from accelkit import config

_PROFILE_HELP = f"ci, full or auto (default: ${config.PROFILE_ENV} or auto)"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="accelkit", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="execute every notebook headless into a build folder")
    run.add_argument("--notebooks", default="notebooks")
    run.add_argument("--out", default="build")
    run.add_argument("--profile", default=None, help=_PROFILE_HELP)
    run.add_argument("--only", nargs="*", help="run only notebooks whose name contains these")
    doc = sub.add_parser("doctor", help="print the hardware card and which notebooks this machine "
                         "can run fully, or (--hardware NAME) the decisions for a hardware class")
    doc.add_argument("--hardware", default=None, metavar="NAME",
                     help="a hardware class (t4, a100, h200, cpu-avx2, tpu-v5e ...) or 'list'; "
                     "nothing is probed")
    doc.add_argument("--notebooks", default=None,
                     help="the notebooks whose requirements are checked (default: ./notebooks)")
    roof = sub.add_parser("roofline", help="measure and print this machine's roofline")
    roof.add_argument("--profile", default=None, help=_PROFILE_HELP)
    ver = sub.add_parser("verify", help="nbval over every notebook; write verified/<class>.json "
                         "and README's 'Verified on' table")
    ver.add_argument("--notebooks", default="notebooks")
    ver.add_argument("--out", default="verified")
    ver.add_argument("--profile", default=None, help=_PROFILE_HELP)
    ver.add_argument("--only", nargs="*", help="verify only notebooks whose name contains these")
    ver.add_argument("--readme", default="README.md", help="README to update ('' to leave it)")
    cmp = sub.add_parser("compare", help="the same result keys across machines: a Markdown "
                         "table, and (--out DIR) DIR/compare.md and DIR/compare.html with plots")
    cmp.add_argument("runs", nargs="*", metavar="RUN",
                     help="a results.json, a build/ folder, a verified/<class>.json, or a "
                     "folder of hand-ins (every *.json in it)")
    cmp.add_argument("--out", default=None, metavar="DIR",
                     help="also write DIR/compare.md and DIR/compare.html")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the accelkit command line; returns the exit status (0 ok, 1 a notebook failed, 2 usage)."""
    args = _parser().parse_args(argv)
    if args.cmd == "doctor":
        from accelkit import course

        try:
            print(course.doctor(args.hardware, args.notebooks))
        except KeyError as exc:
            print(f"accelkit doctor: {exc.args[0]}", file=sys.stderr)
            return 2
        return 0
    if args.cmd == "compare":
        from accelkit import compare

        try:
            print(compare.main(args.runs, args.out), end="")
        except compare.CompareError as exc:
            print(f"accelkit compare: {exc}", file=sys.stderr)
            return 2
        return 0
    profile = config.profile(args.profile)
    if args.cmd == "run":
        from accelkit import report, runner

        summary = runner.run_all(args.notebooks, args.out, profile=profile, only=args.only)
        print(f"wrote {args.out}/summary.md and {args.out}/results.json")
        print(report.hand_in_line(args.out, summary))
        return 0 if all(n["status"] in ("ok", "skipped") for n in summary["notebooks"].values()) else 1
    if args.cmd == "verify":
        from accelkit import hardware, verify

        rec = verify.verify(args.notebooks, args.out, only=args.only, readme=args.readme or None,
                            profile=profile)
        name = verify.record_name(hardware.get(rec["class"]), str(rec["hardware"].get("cpu", "")),
                                  rec["emulated"])
        print(f"wrote {args.out}/{name}.json")
        return 0 if all(n["status"] in ("ok", "skipped") for n in rec["notebooks"].values()) else 1
    if args.cmd == "roofline":
        from accelkit import roofline

        print(roofline.report(profile=profile))
        return 0
    return 2  # pragma: no cover


if __name__ == "__main__":
    sys.exit(main())
