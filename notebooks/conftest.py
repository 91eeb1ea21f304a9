"""nbval (``pytest --nbval-lax notebooks/...``): the kernels it starts inherit this environment.

No front end opens the widgets' comms under nbval, so the explorers (:mod:`accelkit.explore`)
draw their static figure: ``$ACCELKIT_EXPLORE=static`` (see :func:`accelkit.explore.is_interactive`).
"""

import os

os.environ.setdefault("ACCELKIT_EXPLORE", "static")
