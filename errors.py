"""The base of every error swsim reports to users (the CLI prints these without a traceback).

Argument errors form one family: every host-API function that refuses its arguments raises an
``ArgumentError`` (so ``except ValueError`` and ``except SwsimError`` both catch it); a wrong
type is an ``ArgumentTypeError``, also a ``TypeError``. Layers keep their own subclasses
(``HostError``, ``DnnError``, ``GemmError``, ``TrainError``, ``ConfigError``) only to say where
the refusal came from."""


class SwsimError(Exception):
    """An error in the user's input or program, with a message meant for people."""


class ArgumentError(SwsimError, ValueError):
    """A host-API call with an argument it does not accept; the message names the argument."""


class ArgumentTypeError(ArgumentError, TypeError):
    """A host-API call with an argument of the wrong type."""
