"""The one exception type that means "the user gave us something wrong"."""


class UserError(Exception):
    """Bad input from the user: reported as one line on stderr with exit status 2."""

    exit_code = 2
