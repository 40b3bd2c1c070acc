"""The version, in a module of its own: the report and the CLI read it without importing the package's
public API (and so without an upward import)."""

__version__ = "0.1.0"
