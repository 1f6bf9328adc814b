"""`python -m harness ...` is the same as the `membench` console script."""

from harness.cli import main

raise SystemExit(main())
