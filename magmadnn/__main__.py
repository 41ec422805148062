"""``python -m magmadnn``: the command line (see magmadnn.cli)."""

from .cli import main

raise SystemExit(main())
