"""``python tools/compare.py RUN [RUN ...] [--out DIR]``: the same result keys, measured on several machines.

Each RUN is what one machine produced: a ``results.json`` of ``make run`` (or the ``build/``
folder holding it) or a ``verified/<class>.json`` record of ``make verify``; a folder of
hand-ins stands for every ``*.json`` in it (:func:`expand`).  :func:`load`
reads either into a :class:`Run` (its anonymous machine label, one-line hardware card, size
profile and results); :func:`compare` puts the runs side by side:

- a table of the machines (label, hardware card, class, profile, where the numbers come from);
- the machine properties (:data:`MACHINE_PREFIXES`, the measured roofs) across every run;
- every other key side by side, but only between runs of the same size profile: ``ci`` and
  ``full`` time different sizes, so their speedups and throughputs are not the same quantity;
- what was left out, and why (a key one run alone holds, a unit that differs, a profile with
  a single run).

:func:`write` renders it as Markdown (``compare.md``) and as an HTML page (``compare.html``)
with two plots embedded as base64 PNG: every machine's roofline on one chart (the roofs are
:class:`accelkit.roofline.Roofline` objects), and the headline speedups
(:data:`HEADLINE_SPEEDUPS`) as grouped bars per machine, one panel per profile.

Owns reading, checking and comparing run files.  Lives elsewhere: writing ``results.json``,
its format version and machine label in :mod:`accelkit.report`; the verification records in
:mod:`accelkit.report`; the roofline model in :mod:`accelkit.roofline`; the plot stamp in
:mod:`accelkit.plot`.  Bad input raises :class:`CompareError` with one line naming the file;
the command line turns it into exit status 2.
"""

from __future__ import annotations

import base64
import dataclasses
import glob
import html
import io
import json
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelkit import report

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_summary  # noqa: E402  (tools/run_summary.py)

#: Result-key prefixes that describe the machine rather than a workload of the profile's size;
#: they are compared across profiles (a ``ci`` roof on a GPU understates its peak: said so).
MACHINE_PREFIXES = ("roofline.",)
#: The speedups drawn as grouped bars (1 = no gain; for the scaling efficiencies 1 = perfect).
HEADLINE_SPEEDUPS = {
    "amp.matmul_bf16_speedup": "bf16 matmul", "fusion.compile_speedup": "compile chain",
    "fusion.fused_adamw_speedup": "fused AdamW", "ddp.scaling_efficiency": "DDP scaling eff.",
    "gpt.sdpa_speedup": "GPT SDPA rung", "gpt.ladder_speedup": "GPT ladder"}
#: The ``results.json`` format versions this accelkit reads (0: written before versions).
RUN_FORMATS = (0, run_summary.FORMAT)
_ROOF_DTYPES = ("fp32", "bf16", "fp16")
_MD, _HTML = "compare.md", "compare.html"


class CompareError(ValueError):
    """A RUN that cannot be compared; the message is one line and names the file."""


@dataclass(frozen=True)
class Run:
    """One machine's results, read from a ``results.json`` or a verification record.

    Attributes:
        label: the anonymous machine label (``run_summary.machine_label``), made
            unique among the compared runs.
        kind: ``"run"`` (``make run``'s ``results.json``) or ``"verified"`` (``make verify``).
        card: the hardware card in one line.
        hardware_class: the class name (``"cpu-avx2"``), ``"(emulated)"`` appended when so.
        profile: the size profile the notebooks ran in (``"ci"``/``"full"``).
        origin: where the numbers come from, e.g. ``"make run, id 3f9a1c"``, ``"make verify
            2026-12-01"``; never a path.
        notebooks_ok: ``"6 of 7"`` notebooks that passed.
        results: ``{key: {"value", "unit", "notebook"}}``.
        source: the path it was read from (shown on stderr only: it may name a learner).
    """

    label: str
    kind: str
    card: str
    hardware_class: str
    profile: str
    origin: str
    notebooks_ok: str
    results: dict[str, dict[str, Any]] = field(repr=False)
    source: str = field(default="", compare=False)


# ----------------------------------------------------------------------------- reading
def _read_json(path: Path) -> Any:
    """Return the JSON in ``path`` (a file, or a folder holding ``results.json``)."""
    if path.is_dir():
        if not (path / run_summary.SUMMARY_JSON).is_file():
            raise CompareError(f"{path}: no {run_summary.SUMMARY_JSON} in this folder, nor any "
                               "other *.json (`make run` writes one into build/)")
        path = path / run_summary.SUMMARY_JSON
    if not path.exists():
        raise CompareError(f"{path}: no such file or folder")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CompareError(f"{path}: not JSON ({str(exc).splitlines()[0]})") from None
    except OSError as exc:
        raise CompareError(f"{path}: cannot be read ({exc.strerror})") from None


def _kind(path: Path, data: Any) -> str:
    """Return ``"run"`` or ``"verified"`` for a file's JSON, after checking its format version."""
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict) \
            or not isinstance(data.get("hardware"), dict):
        raise CompareError(f"{path}: not an accelkit results file (expected the results.json "
                           "of `make run` or a verified/<class>.json of `make verify`)")
    version = data.get("format", 0)
    if "class" in data and isinstance(data.get("profile"), str):
        if version != report.FORMAT:
            raise CompareError(f"{path}: verification record format {version!r} is unknown to "
                               f"this accelkit (it reads format {report.FORMAT}); update accelkit")
        return "verified"
    if version not in RUN_FORMATS:
        raise CompareError(f"{path}: results format {version!r} is unknown to this accelkit "
                           f"(it reads {', '.join(map(str, RUN_FORMATS))}); update accelkit")
    if not isinstance(data.get("profile"), dict) or not isinstance(data.get("notebooks"), dict):
        raise CompareError(f"{path}: not an accelkit results file (no profile or notebooks)")
    return "run"


def card_line(hardware: dict[str, Any]) -> str:
    """Return a hardware card (:func:`accelkit.env.hardware_summary`) in one line.

    CPU model, usable cores, RAM (GiB), its widest vector/matrix ISA features, each
    accelerator with its memory, and the torch version, joined by `` · ``.
    """
    mem = hardware.get("memory_bytes")
    feats = [k for k in ("amx_bf16", "avx512_bf16", "avx512f", "avx2", "neon")
             if hardware.get("cpu_features", {}).get(k)]
    parts = [f"{hardware.get('cpu') or hardware.get('machine') or 'unknown CPU'}, "
             f"{hardware.get('cpu_count', '?')} cores" + (f", {mem / 2**30:.0f} GiB" if mem else "")
             + (f" ({', '.join(feats)})" if feats else "")]
    for dev in hardware.get("torch_devices", []):
        if dev.get("kind") != "cpu":
            gib = f", {dev['memory_bytes'] / 2**30:.0f} GiB" if dev.get("memory_bytes") else ""
            parts.append(f"{dev.get('description') or dev.get('name')}{gib}")
    if hardware.get("tpu_attached"):
        parts.append("TPU attached")
    if hardware.get("torch"):
        parts.append(f"torch {hardware['torch']}")
    return " · ".join(parts)


def load(path: str | os.PathLike[str]) -> Run:
    """Read one RUN: a ``results.json``, a folder holding one, or a verification record.

    Returns:
        A :class:`Run` (its label not yet made unique: :func:`load_all` does that).

    Raises:
        CompareError: one line naming the file: missing, not JSON, not a results file, an
            unknown format version, or no results in it.
    """
    where = Path(path)
    data = _read_json(where)
    kind = _kind(where, data)
    if not data["results"]:
        raise CompareError(f"{where}: holds no results (its notebooks recorded nothing; "
                           "see the summary.md beside it)")
    try:
        return _run(where, kind, data)
    except (KeyError, TypeError, AttributeError) as exc:
        raise CompareError(f"{where}: not an accelkit results file (malformed: "
                           f"{type(exc).__name__} {exc})") from None


def _run(where: Path, kind: str, data: dict[str, Any]) -> Run:
    """Build the :class:`Run` of a checked file's JSON (a malformed field raises)."""
    if not all({"value", "unit"} <= set(res) for res in data["results"].values()):
        raise KeyError("a result without value and unit")
    hw = data["hardware"]
    cls = data["class"] if kind == "verified" else hw.get("hardware_class") or "unknown"
    emulated = data.get("emulated") if kind == "verified" else hw.get("emulated")
    nbs = [n.get("status") for n in data.get("notebooks", {}).values()]
    ran = [s for s in nbs if s != "skipped"]
    if kind == "verified":
        profile, origin = data["profile"], f"make verify {data.get('date', '')}".strip()
    else:
        profile = data["profile"].get("name", "?")
        origin = "make run" + (f", id {data['machine']['run_id']}" if "machine" in data else "")
    label = data.get("machine", {}).get("label") or run_summary.machine_label(hw | {"hardware_class": cls})
    return Run(label, kind, card_line(hw), cls + (" (emulated)" if emulated else ""), profile,
               origin, f"{sum(s == 'ok' for s in ran)} of {len(ran)}", dict(data["results"]),
               str(where))


def expand(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Return the files the RUN arguments name, in order.

    A folder holding a ``results.json`` stands for it (a ``build/`` folder); any other folder
    for every ``*.json`` in it, sorted (the hand-ins an instructor collected); a pattern with
    ``*`` or ``?`` that names no file is expanded here (Windows shells pass it unexpanded).
    Anything else is kept as given, for :func:`load` to read or reject.
    """
    out: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir() and not (path / run_summary.SUMMARY_JSON).exists():
            out += sorted(path.glob("*.json")) or [path]
        elif not path.exists() and any(c in str(raw) for c in "*?"):
            out += [Path(m) for m in sorted(glob.glob(str(raw)))] or [path]
        else:
            out.append(path)
    return out


def load_all(paths: Sequence[str | os.PathLike[str]]) -> list[Run]:
    """Read every RUN (:func:`expand`, :func:`load`) and make their labels unique
    (``label``, ``label #2`` ...).

    Raises:
        CompareError: for an empty list, or the first RUN that cannot be read.
    """
    if not paths:
        raise CompareError("no RUN given: name results.json files, build/ folders or "
                           "verified/<class>.json records")
    runs: list[Run] = []
    seen: dict[str, int] = {}
    for path in expand(paths):
        run = load(path)
        seen[run.label] = seen.get(run.label, 0) + 1
        if seen[run.label] > 1:
            run = dataclasses.replace(run, label=f"{run.label} #{seen[run.label]}")
        runs.append(run)
    return runs


# ----------------------------------------------------------------------------- comparing
@dataclass
class Comparison:
    """What :func:`compare` found comparable among the runs.

    Attributes:
        runs: the runs, in the order given.
        machine_rows: ``[(key, unit, [cell per run])]`` of the machine properties, all runs.
        groups: ``{profile: (runs of that profile, [(key, unit, [cell per run])])}``.
        left_out: one sentence per thing not compared, saying why.
    """

    runs: list[Run]
    machine_rows: list[tuple[str, str, list[str]]]
    groups: dict[str, tuple[list[Run], list[tuple[str, str, list[str]]]]]
    left_out: list[str]


def _rows(runs: list[Run], keys: list[str], left_out: list[str],
          scope: str) -> list[tuple[str, str, list[str]]]:
    """Rows of ``keys`` that at least two of ``runs`` hold in one unit; the rest to ``left_out``."""
    rows: list[tuple[str, str, list[str]]] = []
    alone: dict[str, list[str]] = {}
    units_differ: list[str] = []
    for key in keys:
        held = [r for r in runs if key in r.results]
        units = {r.results[key]["unit"] for r in held}
        if len(held) < 2:
            alone.setdefault(held[0].label, []).append(key)
        elif len(units) > 1:
            units_differ.append(f"`{key}` ({' vs '.join(sorted(units))})")
        else:
            rows.append((key, units.pop(), [report.format_value(r.results[key]["value"], "")
                                            if key in r.results else "–" for r in runs]))
    for label, only in alone.items():
        left_out.append(f"{scope}: {len(only)} key(s) only **{label}** holds (the others did "
                        "not record them: notebook not run, skipped or failed, or an older "
                        f"course): {_names(only)}")
    if units_differ:
        left_out.append(f"{scope}: recorded in different units: {', '.join(units_differ)}")
    return rows


def _names(keys: list[str], most: int = 8) -> str:
    """``keys`` as Markdown code, at most ``most`` of them and a count of the rest."""
    shown = ", ".join(f"`{k}`" for k in keys[:most])
    return shown + (f" and {len(keys) - most} more" if len(keys) > most else "")


def _is_machine_key(key: str) -> bool:
    return key.startswith(MACHINE_PREFIXES)


def compare(runs: list[Run]) -> Comparison:
    """Put ``runs`` side by side where they are comparable.

    Machine properties (:data:`MACHINE_PREFIXES`) are compared across all runs; every other
    key only between runs of one size profile, and only when two or more of them hold it in
    the same unit.  Everything else is listed in ``left_out`` with the reason.

    Returns:
        A :class:`Comparison`.
    """
    left_out: list[str] = []
    every = sorted({k for r in runs for k in r.results})
    machine = _rows(runs, [k for k in every if _is_machine_key(k)], left_out,
                    "Machine properties") if len(runs) > 1 else []
    profiles = sorted({r.profile for r in runs})
    if len(profiles) > 1:
        left_out.append(f"Runs in different size profiles ({', '.join(profiles)}): workload "
                        "results are compared only within a profile (the profiles time different "
                        "sizes); the measured roofs are compared across them, and a `ci` roof "
                        "understates a GPU's peak (its matmul is too small to fill the GPU)")
    groups: dict[str, tuple[list[Run], list[tuple[str, str, list[str]]]]] = {}
    for prof in profiles:
        members = [r for r in runs if r.profile == prof]
        keys = sorted({k for r in members for k in r.results if not _is_machine_key(k)})
        if len(members) < 2:
            left_out.append(f"Profile `{prof}`: **{members[0].label}** is its only run, so its "
                            f"{len(keys)} workload result(s) have nothing to be compared with")
            continue
        groups[prof] = (members, _rows(members, keys, left_out, f"Profile `{prof}`"))
    return Comparison(runs, machine, groups, left_out)


# ----------------------------------------------------------------------------- rendering
def _tables(cmp: Comparison) -> list[tuple[str, list[str], list[list[str]]]]:
    """The report's tables as ``(heading, header, rows)``, shared by Markdown and HTML."""
    tables = [("Machines", ["machine", "hardware", "class", "profile", "from", "notebooks ok"],
               [[r.label, r.card, r.hardware_class, r.profile, r.origin, r.notebooks_ok]
                for r in cmp.runs])]
    if cmp.machine_rows:
        tables.append(("Machine properties (all profiles)",
                       ["key", "unit"] + [r.label for r in cmp.runs],
                       [[f"`{k}`", u, *cells] for k, u, cells in cmp.machine_rows]))
    for prof, (members, rows) in cmp.groups.items():
        tables.append((f"Results in the `{prof}` profile",
                       ["key", "unit"] + [r.label for r in members],
                       [[f"`{k}`", u, *cells] for k, u, cells in rows]))
    return tables


def markdown(cmp: Comparison) -> str:
    """Render a :class:`Comparison` as Markdown: the tables, then what was left out and why."""
    lines = [f"# accelkit compare: {len(cmp.runs)} machine(s)", ""]
    for heading, header, rows in _tables(cmp):
        lines += [f"## {heading}", "", "| " + " | ".join(header) + " |",
                  "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(cells) + " |" for cells in rows] + [""]
    lines += ["## Left out, and why", ""]
    lines += [f"- {reason}" for reason in cmp.left_out] or ["- nothing: every key was compared"]
    return "\n".join(lines) + "\n"


def roofs(runs: list[Run]) -> dict[str, Any]:
    """Return ``{label: Roofline}`` for each run that recorded its roofs (``roofline.*`` keys).

    Built from ``roofline.matmul_<dtype>_tflops`` (fp32, bf16, fp16 where measured) and
    ``roofline.copy_gbps``; a run lacking the fp32 peak or the bandwidth has none.
    """
    from accelkit.roofline import Roofline

    out = {}
    for run in runs:
        res = run.results
        peaks = {d: res[f"roofline.matmul_{d}_tflops"]["value"] for d in _ROOF_DTYPES
                 if f"roofline.matmul_{d}_tflops" in res}
        if "fp32" in peaks and "roofline.copy_gbps" in res:
            out[run.label] = Roofline(peaks, res["roofline.copy_gbps"]["value"], device=run.label,
                                      device_name=run.card, profile=run.profile)
    return out


def _png(fig: Any) -> str:
    """Return ``fig`` as a base64 PNG ``data:`` URI and close it."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def roofline_figure(runs: list[Run]) -> Any:
    """Draw every run's roofline on one log-log chart (colour: machine; line style: dtype).

    Returns:
        The matplotlib ``Figure``, or ``None`` when no run recorded its roofs.
    """
    import matplotlib.pyplot as plt
    import numpy as np

    from accelkit import plot

    machines = roofs(runs)
    if not machines:
        return None
    ridges = [r.ridge_point(d) for r in machines.values() for d in r.peak_tflops]
    xs = np.geomspace(min(ridges) / 100, max(ridges) * 20, 200)
    fig, ax = plt.subplots(figsize=(7.5, 4.6), layout="constrained")
    styles = dict(zip(_ROOF_DTYPES, ("-", "--", ":")))
    for i, (label, roof) in enumerate(machines.items()):
        for dtype in roof.peak_tflops:
            ax.plot(xs, [roof.attainable_tflops(float(x), dtype) for x in xs], styles[dtype],
                    color=f"C{i}", lw=2, label=f"{label} {dtype} ({roof.profile}): "
                    f"{roof.peak(dtype):.3g} TFLOP/s, {roof.bandwidth_gbps:.3g} GB/s")
    ax.set(xscale="log", yscale="log", xlabel="arithmetic intensity (FLOP/byte)",
           ylabel="attainable TFLOP/s", title="Measured rooflines, one colour per machine")
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(True, which="both", alpha=0.3)
    plot.stamp(ax, f"{len(machines)} machines", "/".join(sorted({r.profile for r in runs})))
    return fig


def speedup_figure(cmp: Comparison) -> Any:
    """Draw the headline speedups (:data:`HEADLINE_SPEEDUPS`) as grouped bars, a panel per profile.

    Bars are grouped by result and coloured by machine; a dashed line marks 1 (no gain, or
    perfect scaling for the efficiencies).  Only runs of one profile share a panel; a run
    holding none of these keys has no bars.

    Returns:
        The matplotlib ``Figure``, or ``None`` when no run holds a headline speedup.
    """
    import matplotlib.pyplot as plt
    import numpy as np

    from accelkit import plot

    held = [r for r in cmp.runs if any(k in r.results for k in HEADLINE_SPEEDUPS)]
    panels = {p: [r for r in held if r.profile == p] for p in sorted({r.profile for r in held})}
    if not panels:
        return None
    fig, axes = plt.subplots(len(panels), 1, figsize=(7.5, 3.4 * len(panels)),
                             layout="constrained", squeeze=False)
    colour = {r.label: f"C{i}" for i, r in enumerate(cmp.runs)}
    for ax, (prof, members) in zip(axes[:, 0], panels.items()):
        keys = [k for k in HEADLINE_SPEEDUPS if any(k in r.results for r in members)]
        width = 0.8 / len(members)
        for j, run in enumerate(members):
            vals = [run.results[k]["value"] if k in run.results else np.nan for k in keys]
            ax.bar(np.arange(len(keys)) + (j - (len(members) - 1) / 2) * width, vals, width,
                   color=colour[run.label], label=run.label)
        ax.axhline(1.0, color="0.3", ls="--", lw=1)
        ax.set_xticks(np.arange(len(keys)), [HEADLINE_SPEEDUPS[k] for k in keys], fontsize=8)
        ax.set(ylabel="speedup (x) / efficiency", title=f"Headline speedups, profile {prof}")
        ax.legend(fontsize=7)
        plot.stamp(ax, f"{len(members)} machines", prof)
    return fig


def _inline(text: str) -> str:
    """HTML-escape ``text`` and render its Markdown `code` and **bold** spans."""
    out = html.escape(text)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    return re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", out)


def html_page(cmp: Comparison) -> str:
    """Render a :class:`Comparison` as one self-contained HTML page, its plots embedded (PNG)."""
    parts = [f"<h1>accelkit compare: {len(cmp.runs)} machine(s)</h1>"]
    for heading, header, rows in _tables(cmp):
        head = "".join(f"<th>{_inline(h)}</th>" for h in header)
        body = "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in cells) + "</tr>"
                       for cells in rows)
        parts.append(f"<h2>{_inline(heading)}</h2><table><tr>{head}</tr>{body}</table>")
        if heading.startswith("Machine properties") or (heading == "Machines"
                                                        and not cmp.machine_rows):
            fig = roofline_figure(cmp.runs)
            if fig is not None:
                parts.append(f'<p><img alt="rooflines" src="{_png(fig)}"></p>')
    fig = speedup_figure(cmp)
    if fig is not None:
        parts += ["<h2>Headline speedups</h2>", f'<p><img alt="speedups" src="{_png(fig)}"></p>']
    parts.append("<h2>Left out, and why</h2><ul>"
                 + "".join(f"<li>{_inline(r)}</li>" for r in cmp.left_out or
                           ["nothing: every key was compared"]) + "</ul>")
    style = ("body{font-family:sans-serif;max-width:70em;margin:2em auto}"
             "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;"
             "font-size:90%}img{max-width:100%}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>accelkit compare</title>"
            f"<style>{style}</style></head><body>{''.join(parts)}</body></html>\n")


def write(cmp: Comparison, out: str | os.PathLike[str]) -> tuple[Path, Path]:
    """Write ``<out>/compare.md`` and ``<out>/compare.html`` (folder created); return both paths."""
    import matplotlib

    matplotlib.use("Agg")  # a file, never a window; before pyplot is imported
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    md, page = out_dir / _MD, out_dir / _HTML
    md.write_text(markdown(cmp), encoding="utf-8")
    page.write_text(html_page(cmp), encoding="utf-8")
    return md, page


def main(paths: Sequence[str], out: str | None = None) -> str:
    """The ``compare`` command: read the RUNs, compare them, write the files when ``out`` is set.

    Prints which file each machine label came from on stderr (paths may name learners, so
    they stay out of the report) and returns the Markdown report.

    Raises:
        CompareError: for bad input, naming the file.
    """
    runs = load_all(paths)
    for run in runs:
        print(f"[accelkit compare] {run.label} <- {run.source}", file=sys.stderr)
    cmp = compare(runs)
    if out is not None:
        md, page = write(cmp, out)
        print(f"[accelkit compare] wrote {md} and {page}", file=sys.stderr)
    return markdown(cmp)


def cli(argv: list[str] | None = None) -> int:
    """Command line: print the Markdown report; exit 2 on bad input (naming the file)."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0].strip("`"))
    parser.add_argument("runs", nargs="*", metavar="RUN",
                        help="a results.json, a build/ folder, a verified/<class>.json, or a "
                        "folder of hand-ins (every *.json in it)")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="also write DIR/compare.md and DIR/compare.html")
    args = parser.parse_args(argv)
    try:
        print(main(args.runs, args.out), end="")
    except CompareError as exc:
        print(f"compare: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(cli())
