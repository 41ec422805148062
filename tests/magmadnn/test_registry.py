"""Names, instances and config dicts resolve the same way for optimizers, losses and initializers."""

import pytest

from magmadnn import initializers, losses, optimizers


@pytest.mark.parametrize("module, name, base", [
    (optimizers, "adam", optimizers.Optimizer),
    (losses, "mse", losses.Loss),
    (initializers, "he_normal", initializers.Initializer),
])
def test_resolve_name_instance_config(module, name, base):
    obj = module.get(name.upper())
    assert isinstance(obj, base)
    assert module.get(obj) is obj
    again = module.get({"class_name": type(obj).__name__, "config": {}})
    assert type(again) is type(obj)


@pytest.mark.parametrize("module, kind", [(optimizers, "optimizer"), (losses, "loss"), (initializers, "initializer")])
def test_resolve_errors(module, kind):
    with pytest.raises(ValueError, match=f"unknown {kind} 'nope'; expected one of"):
        module.get("nope")
    with pytest.raises(ValueError, match=f"unknown {kind} class 'Nope'"):
        module.get({"class_name": "Nope"})
    with pytest.raises(TypeError, match=f"{kind} must be a name"):
        module.get(3.5)


def test_constant_initializer_from_config():
    init = initializers.get(initializers.Constant(0.5).to_config())
    assert isinstance(init, initializers.Constant)
