"""The base of every error swsim reports to users (the CLI prints these without a traceback)."""


class SwsimError(Exception):
    """An error in the user's input or program, with a message meant for people."""
