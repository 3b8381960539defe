"""Errors that the CLI turns into one clear line and exit code 2."""


class QuicbenchError(Exception):
    """A user-facing error: bad input, missing binary, not root, ...

    The message names what is wrong and what is accepted; the CLI prints it on one
    line and exits with code 2.
    """
