"""TEACHING.md's generated tables: run times per notebook, and what each hardware class shows.

    python tools/teaching.py --check   # exit 1 when a table differs from its sources
    python tools/teaching.py --write   # regenerate them in place

Two blocks of TEACHING.md are written here, each between its markers:

* ``<!-- teaching-runtimes:start/end -->``: per notebook, its measured run time on the CI
  machine class (``verified/cpu-avx512-bf16.json``, as in README.md, :mod:`runtimes`) and on
  every other class measured for real (``verified/*.json``, emulated records left out: they
  time this CPU, not the class): an AVX2-only CPU, a GPU, a TPU; "none yet" without one.
* ``<!-- expectations:start/end -->``: for the classes a classroom has (laptops, Apple,
  Kaggle's P100, Colab's T4, A100 and TPU, ...), the autocast choice, the Keras policy and
  every speedup claim's floor (or, where the class lets a measurement on the machine decide,
  the floor it then gets), from
  :mod:`accelkit.hardware` and :mod:`accelkit.claims` (what ``python -m accelkit.env
  --hardware NAME`` prints, one class per column).

Owns these two tables.  Lives elsewhere: the claims and classes (``accelkit/claims.py``,
``accelkit/hardware.py``), the records (``accelkit/report.py``), the README's run times
(``tools/runtimes.py``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import runtimes  # noqa: E402  (tools/runtimes.py, beside this file)

from accelkit import report  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TEACHING = ROOT / "TEACHING.md"
#: The classes a classroom brings, in the order the table shows them.
ROOM = ["cpu-avx2", "cpu-avx512-bf16", "cpu-amx", "cpu-arm64", "apple-mps", "p100", "t4", "l4",
        "a100-40gb", "tpu-v5e"]
#: The cell of a claim that a measurement on the learner's machine decides (a class whose CPUs
#: disagree: ``HardwareClass.bf16_measured``), and the line under the table that explains it.
MEASURED = "≥ {floor:g}x if faster here"
MEASURED_NOTE = ("*if faster here*: this class's CPUs disagree on bf16 (a Xeon VM 0.55x of fp32, "
                 "an AMD Zen 4 2.9x-4.4x), so a short bf16 vs fp32 measurement on the learner's "
                 "machine decides (`ak.precision.amp_path`): the floor where it finds bf16 "
                 "faster, no claim where not.")
BLOCKS = ("teaching-runtimes", "expectations")


def runtime_table(folder: Path = ROOT / "verified") -> str:
    """Return the Markdown table of run times per notebook: CI CPU, and each other real record."""
    real = report.load_records(folder, real_only=True)
    ci = next((r for r in real if r["class"] == runtimes.CI_CLASS), None)
    if ci is None:
        raise ValueError(f"{folder}: no verification record of {runtimes.CI_CLASS}")
    others = [r for r in real if r is not ci]
    head = f"| notebook | {_column(ci)} | " + (
        " | ".join(_column(r) for r in others) or "GPU / TPU record") + " |"
    lines = [head, "|---|---|" + "---|" * max(1, len(others))]
    for stem in ci["notebooks"]:
        cells = [_cell(ci, stem)] + ([_cell(r, stem) for r in others] or ["none yet"])
        lines.append(f"| {stem} | " + " | ".join(cells) + " |")
    cores = ci.get("hardware", {}).get("cpu_count", "?")
    lines.append(f"\nEach column is `make verify` on one machine. The first is the class whose "
                 f"run times README.md and the notebooks quote (`{ci['class']}`, {cores} cores; "
                 "CI's 2-core machine is that Xeon or an AVX2-only AMD EPYC). A column appears "
                 "for each other machine whose `make verify` adds its record to `verified/` (a "
                 "GPU, a TPU, another CPU class); emulated records are left out.")
    return "\n".join(lines)


def _column(record: dict) -> str:
    """A column header: the class, its CPU when recorded, the profile and the date."""
    cpu = record.get("hardware", {}).get("cpu")
    return f"`{record['class']}`{f', {cpu}' if cpu else ''} ({record['profile']}, {record['date']})"


def _cell(record: dict, stem: str) -> str:
    secs = runtimes.wall(record, stem)
    return runtimes.duration(secs) if secs is not None else "not measured"


def expectations_table(classes: list[str] = ROOM) -> str:
    """Return the Markdown table: per claim, its floor on each class ("·": shown, no claim).

    Raises:
        KeyError: for an unknown class name.
    """
    from accelkit import claims, hardware

    cls = [hardware.get(n) for n in classes]
    faster = claims.measured_bf16(True, "")  # the claims a machine that measured bf16 faster gets
    lines = ["| | " + " | ".join(f"`{c.name}`" for c in cls) + " |",
             "|---|" + "---|" * len(cls),
             "| autocast dtype | " + " | ".join(
                 c.amp_dtype + (" + GradScaler" if c.grad_scaler else "") for c in cls) + " |",
             "| Keras policy | " + " | ".join(c.keras_policy for c in cls) + " |"]
    for name, what in hardware.CLAIMS.items():
        cells = []
        for c in cls:
            f = c.floor(name)
            if c.bf16_measured and name in faster and faster[name].floor is not None:
                cells.append(MEASURED.format(floor=faster[name].floor))
            else:
                cells.append(f"≥ {f:g}x" if f is not None else "·")
        lines.append(f"| {what} | " + " | ".join(cells) + " |")
    if any(c.bf16_measured for c in cls):
        lines.append("\n" + MEASURED_NOTE)
    return "\n".join(lines)


def update(text: str, folder: Path = ROOT / "verified") -> str:
    """Return TEACHING.md's text with both generated blocks current.

    Raises:
        ValueError: when a block's markers are missing.
    """
    for block, body in zip(BLOCKS, (runtime_table(folder), expectations_table())):
        start, end = f"<!-- {block}:start -->", f"<!-- {block}:end -->"
        if start not in text or end not in text:
            raise ValueError(f"TEACHING.md has no {start} ... {end} markers")
        head, rest = text.split(start, 1)
        text = f"{head}{start}\n{body}\n{end}{rest.split(end, 1)[1]}"
    return text


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--check`` (default) or ``--write``."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    text = TEACHING.read_text(encoding="utf-8")
    new = update(text)
    if new == text:
        return 0
    if args.write:
        TEACHING.write_text(new, encoding="utf-8")
        print(f"updated {TEACHING.name}")
        return 0
    print("TEACHING.md's tables are stale: python tools/teaching.py --write", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
