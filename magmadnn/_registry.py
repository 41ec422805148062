"""Resolve a user-facing identifier (instance, registered name or config dict) to an object of a base class."""

from __future__ import annotations


def resolve(identifier, base: type, by_name: dict, kind: str):
    """``identifier`` as a ``base`` instance: itself, ``by_name[name]()``, or ``{"class_name", "config"}``.

    An unknown name is a ``ValueError`` listing the known ones; any other kind of value is a ``TypeError``.
    """
    if isinstance(identifier, base):
        return identifier
    if isinstance(identifier, str):
        try:
            return by_name[identifier.lower()]()
        except KeyError:
            raise ValueError(f"unknown {kind} {identifier!r}; expected one of {sorted(by_name)}") from None
    if isinstance(identifier, dict):
        by_class = {cls.__name__: cls for cls in by_name.values()}
        cls = by_class.get(identifier.get("class_name"))
        if cls is None:
            raise ValueError(f"unknown {kind} class {identifier.get('class_name')!r}; expected one of "
                             f"{sorted(by_class)}")
        return cls(**identifier.get("config", {}))
    raise TypeError(f"{kind} must be a name, a {base.__name__} or a config dict, got {identifier!r}")
