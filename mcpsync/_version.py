"""The release number, in a module of its own.

Strategy: everything inside the package that reports the version (the CLI's `--version`, the
server's `serverInfo`, the client's `clientInfo`) imports it from here, never from the package
root, so no module depends on `mcpsync/__init__.py` having finished importing. The build reads the
same line (`[tool.setuptools.dynamic]` in pyproject.toml), so the number is written once.
"""

__version__ = "0.1.0"
