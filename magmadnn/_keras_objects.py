"""A family of Keras objects that layers take by name, configuration dict, class, instance or plain callable
(Keras' ``get`` / ``serialize`` / ``deserialize`` of :mod:`magmadnn.regularizers` and :mod:`magmadnn.constraints`):
written once, each module naming its own family."""

from __future__ import annotations


class Family:
    """``kind`` objects: subclasses of ``base``, by the names in ``by_name``; ``takes`` says what a plain callable
    is given; ``refused`` maps names magmadnn refuses to the reason; ``hint`` ends the unknown-name message."""

    def __init__(self, kind: str, base: type, by_name: dict, takes: str, refused: dict | None = None,
                 hint: str = ""):
        self.kind, self.base, self.by_name, self.takes = kind, base, by_name, takes
        self.refused, self.hint = refused or {}, hint

    def subclass(self, name: str):
        """A subclass of the base by class name (magmadnn's, or one the user defined), or None."""
        todo = [self.base]
        while todo:
            cls = todo.pop()
            if cls.__name__ == name:
                return cls
            todo.extend(cls.__subclasses__())
        return None

    def get(self, identifier):
        """An object from None, a name, a config dict, a class, an instance or a callable (Keras' ``get``)."""
        if identifier is None or isinstance(identifier, self.base):
            return identifier
        if isinstance(identifier, str):
            if identifier in self.refused:
                raise ValueError(f"{self.kind} {identifier!r}: {self.refused[identifier]}")
            if identifier not in self.by_name:
                raise ValueError(f"unknown {self.kind} {identifier!r}; expected one of {sorted(self.by_name)}"
                                 f"{self.hint}")
            return self.by_name[identifier]()
        if isinstance(identifier, dict):
            return self.deserialize(identifier)
        if isinstance(identifier, type) and issubclass(identifier, self.base):
            return identifier()
        if callable(identifier):
            return identifier
        raise TypeError(f"{self.kind} must be None, a name ({sorted(self.by_name)}), a {self.base.__name__}, a config "
                        f"dict or a callable taking {self.takes}, got {identifier!r}")

    def serialize(self, obj):
        """``{"class_name", "config"}`` (None for None); a plain callable cannot be saved: a TypeError says so."""
        if obj is None:
            return None
        if not isinstance(obj, self.base):
            raise TypeError(f"the {self.kind} {obj!r} is a plain callable, which cannot be saved with the model: "
                            f"write it as a {self.kind}s.{self.base.__name__} subclass with get_config()")
        return obj.to_config()

    def deserialize(self, config: dict):
        """The object a ``{"class_name", "config"}`` dict describes."""
        if not isinstance(config, dict) or "class_name" not in config:
            raise ValueError(f"a {self.kind} config is {{'class_name': ..., 'config': {{...}}}}, got {config!r}")
        cls = self.subclass(config["class_name"])
        if cls is None:
            raise ValueError(f"unknown {self.kind} class {config['class_name']!r}; define (import) it before loading")
        return cls.from_config(dict(config.get("config") or {}))
