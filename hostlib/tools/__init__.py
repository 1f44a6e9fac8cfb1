"""Tools on top of the host library: loop analysis (``analyze``), run reports (``report``),
the benchmark commands (``bench``) and the ``swsim`` subcommands of the host layer (``cli``)."""
