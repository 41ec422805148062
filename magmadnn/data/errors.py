"""Typed errors of magmadnn.data: every message names the file and what was expected."""

from __future__ import annotations


class DatasetError(ValueError):
    """A dataset file is missing, truncated, malformed or inconsistent with its companion file."""


class ChecksumError(DatasetError):
    """A downloaded file does not match its published checksum (nothing is kept in the cache)."""
