"""Containers that keep a path for code written against earlier magmadnn: ``layer.weights`` and
``model.evaluate(...)`` were dicts and are now Keras' list (and scalar); indexing them with a string fails naming
the new spelling instead of Python's "list indices must be integers or slices, not str". They are a ``list`` and a
``float`` in every other way (equal to them, the same ``isinstance``), and cost nothing until indexed by a string."""

from __future__ import annotations

__all__ = ["WeightList", "ResultList", "ResultScalar"]


class WeightList(list):
    """Keras' ``layer.weights`` list; ``weights["kernel"]`` names ``layer.params["kernel"]``."""

    __slots__ = ()

    def __getitem__(self, index):
        if isinstance(index, str):
            raise TypeError(f"layer.weights is Keras' list of weights; the weights by name are "
                            f"layer.params[{index!r}] (or layer.{index} once built)")
        return list.__getitem__(self, index)


_RESULTS = ("evaluate() / train_on_batch() return Keras' list [loss, *metrics] (or the loss alone) (as Keras 3); "
            "pass return_dict=True for the dict, e.g. model.evaluate(x, y, return_dict=True)[{!r}]")


class ResultList(list):
    """Keras' ``[loss, *metrics]`` of ``evaluate`` / ``train_on_batch``; ``results["loss"]`` names ``return_dict``."""

    __slots__ = ()

    def __getitem__(self, index):
        if isinstance(index, str):
            raise TypeError(_RESULTS.format(index))
        return list.__getitem__(self, index)


class ResultScalar(float):
    """Keras' scalar loss of ``evaluate`` (a model compiled without metrics); ``loss["loss"]`` names
    ``return_dict``."""

    __slots__ = ()

    def __getitem__(self, index):
        if isinstance(index, str):
            raise TypeError(_RESULTS.format(index))
        raise TypeError(f"'float' object is not subscriptable (evaluate() returned the loss alone: {float(self)})")
