"""``python -m fraglab.tune`` (``fraglab tune``): the command line of :func:`fraglab.tune`.

    python -m fraglab.tune SPEC --space KEY=V1,V2 [--space KEY=LO..HI ...] --objective NAME
        [--min] [--budget N] [--backend local|ray] [--constraint "METRIC<=VALUE"] [--json OUT]

Exit codes: 0 a best trial was found, 1 an error (fraglab's message on stderr), 2 bad
arguments, 3 no trial was feasible, 130 interrupted.
"""

import sys

from ._tune import main

if __name__ == "__main__":
    sys.exit(main())
