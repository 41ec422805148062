"""The package version (its one home)."""

__version__ = "0.1.0"
