"""The one exception type that means "the user gave us something wrong", and warnings to the user."""

import sys


class UserError(Exception):
    """Bad input from the user: reported as one line on stderr with exit status 2."""

    exit_code = 2


def warn(message: str) -> None:
    """Tell the user something that does not stop the run: one line on stderr, `membench: warning: ...`."""
    print(f"membench: warning: {message}", file=sys.stderr)
