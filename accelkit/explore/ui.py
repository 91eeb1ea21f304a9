"""The explorers' front end: interactive (ipywidgets) or static, and settings printed as code.

One rule decides the mode (:func:`is_interactive`):

1. ``$ACCELKIT_EXPLORE`` set to ``static`` (or ``0``/``off``) → static;
   ``interactive`` → widgets (when ipywidgets imports); empty or ``auto`` → rule 2.
   The course's runners set ``static``: ``tools/run_notebooks.py`` (``make run``,
   ``tools/refresh_notebooks.py``, so stored outputs and HTML exports hold a picture) and
   ``notebooks/conftest.py`` (nbval), because there no front end ever opens the widgets' comms.
2. ipywidgets importable **and** running inside an IPython *kernel* (``get_ipython().kernel``
   exists: JupyterLab, Jupyter Notebook, Colab, VS Code) → widgets; a plain Python process or
   a terminal IPython → static.

Static draws the default state as a plain matplotlib figure, prints the readout and the call
that reproduces it (``ak.explore.memory(n_params=..., ...)``).  Interactive shows one control
per setting (core widgets only: Colab renders them without a custom widget manager), the
figure in an ``Output`` and the readout in an ``HTML`` widget with the CSS class
``ak-explore-readout`` (the browser check reads it).

This module owns only the front end; each explorer's numbers come from its ``compute``
function (``accelkit.explore.*_view``), which calls the course's models.
"""

from __future__ import annotations

import html
import importlib.util
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: The environment variable that forces the mode (see the module docstring).
MODE_ENV = "ACCELKIT_EXPLORE"
READOUT_CLASS = "ak-explore-readout"


def is_interactive() -> bool:
    """True when explorers should show widgets, False for the static fallback.

    Raises:
        ValueError: for a ``$ACCELKIT_EXPLORE`` other than ``static``/``0``/``off``,
            ``interactive``, ``auto`` or empty.
    """
    mode = os.environ.get(MODE_ENV, "").strip().lower()
    if mode in ("static", "0", "off"):
        return False
    if mode not in ("", "auto", "interactive"):
        raise ValueError(f"${MODE_ENV} must be 'static', 'interactive' or 'auto', got {mode!r}")
    if importlib.util.find_spec("ipywidgets") is None:
        return False
    if mode == "interactive":
        return True
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - ipywidgets depends on IPython
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


@dataclass(frozen=True)
class Control:
    """One setting's control.

    Attributes:
        kind: ``"log"`` (a float on a log slider), ``"logint"`` (an int on a log slider),
            ``"int"`` (an int slider), ``"choice"`` (a dropdown) or ``"bool"`` (a checkbox).
        low, high: the slider's range (for ``"log"``/``"logint"`` in the value's unit, not
            the exponent).
        options: the dropdown's options (``"choice"``).
        label: the text next to the control.
    """

    kind: str
    label: str
    low: float = 1
    high: float = 100
    options: Sequence[Any] = ()

    def widget(self, value: Any) -> Any:
        """Return an ipywidget set to ``value`` (the range widens to hold it)."""
        import math

        import ipywidgets as w

        style, layout = {"description_width": "initial"}, w.Layout(width="360px")
        common = dict(description=self.label, style=style, layout=layout, continuous_update=False)
        if self.kind in ("log", "logint"):
            value = max(value, self.low) if value <= 0 else value  # a log slider has no 0
            lo, hi = min(self.low, value), max(self.high, value)
            return w.FloatLogSlider(value=value, base=10, min=math.log10(lo), max=math.log10(hi),
                                    step=0.05, readout_format=".3g", **common)
        if self.kind == "int":
            return w.IntSlider(value=value, min=int(min(self.low, value)),
                               max=int(max(self.high, value)), **common)
        if self.kind == "choice":
            options = list(self.options) + ([value] if value not in self.options else [])
            return w.Dropdown(options=options, value=value, description=self.label, style=style,
                              layout=layout)
        if self.kind == "bool":
            return w.Checkbox(value=bool(value), description=self.label, style=style)
        raise ValueError(f"unknown control kind {self.kind!r}")

    def read(self, widget: Any) -> Any:
        """Return the widget's value as the setting's type (``"logint"`` rounds to an int)."""
        return max(1, round(widget.value)) if self.kind == "logint" else widget.value


def as_code(name: str, settings: Mapping[str, Any], names: Mapping[str, str] = {}) -> str:
    """Return the call that reproduces ``settings``: ``ak.explore.<name>(key=value, ...)``.

    Args:
        name: the explorer's entry point (``"memory"``).
        settings: the keyword arguments; floats (also inside dicts and lists) written with 6
            significant digits.
        names: settings that are objects, not literals, written as this name instead
            (``{"roof": "roof"}``).
    """
    def lit(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.6g}"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{lit(k)}: {lit(x)}" for k, x in v.items()) + "}"
        if isinstance(v, list):
            return "[" + ", ".join(lit(x) for x in v) + "]"
        return repr(v)

    args = ", ".join(f"{k}={names[k] if k in names else lit(v)}" for k, v in settings.items())
    return f"ak.explore.{name}({args})"


Render = Callable[[dict[str, Any]], tuple[Any, str]]


def show(name: str, settings: dict[str, Any], controls: Mapping[str, Control], render: Render,
         names: Mapping[str, str] = {}) -> None:
    """Show an explorer: widgets that re-render on every change, or the static fallback.

    Args:
        name: the entry point's name, for the printed call.
        settings: every keyword argument of the entry point, at its start value.
        controls: the settings a learner can move, by key.
        render: ``settings -> (matplotlib Figure, readout text)``.
        names: non-literal settings (see :func:`as_code`).
    """
    import matplotlib.pyplot as plt

    if not is_interactive():
        fig, text = render(settings)
        plt.show()
        plt.close(fig)
        print(text)
        print(as_code(name, settings, names))
        return
    import ipywidgets as w
    from IPython.display import display

    boxes = {k: c.widget(settings[k]) for k, c in controls.items()}
    readout = w.HTML()
    readout.add_class(READOUT_CLASS)
    out = w.Output()

    def update(_: Any = None) -> None:
        now = {**settings, **{k: controls[k].read(b) for k, b in boxes.items()}}
        with out:
            out.clear_output(wait=True)
            try:
                fig, text = render(now)
            except ValueError as err:  # a combination the model rejects: say why, keep going
                readout.value = f"<pre>{html.escape(str(err))}</pre>"
                return
            plt.show()
            plt.close(fig)
        readout.value = f"<pre>{html.escape(text)}\n{html.escape(as_code(name, now, names))}</pre>"

    for box in boxes.values():
        box.observe(update, names="value")
    update()
    display(w.VBox([w.VBox(list(boxes.values())), readout, out]))


__all__ = ["MODE_ENV", "Control", "as_code", "is_interactive", "show"]
