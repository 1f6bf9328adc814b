"""`python -m harness ...` is the same as the `membench` console script."""

from harness.app.cli import main

raise SystemExit(main())
