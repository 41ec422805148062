"""Keras 3's ``optimizer.apply(grads, variables)`` and ``apply_gradients(zip(grads, variables))``: what a custom
``train_step`` calls after ``magmadnn.grad`` (a mixin of :class:`magmadnn.optimizers.Optimizer`)."""

from __future__ import annotations

__all__ = ["KerasApply"]


class KerasApply:
    def apply(self, grads, trainable_variables) -> None:
        """One update of each variable with its gradient (a Tensor or backend array; None leaves it as it is).
        One optimizer serves one list of variables (its slots follow their positions)."""
        params, grads = list(trainable_variables), list(grads)
        if len(grads) != len(params):
            raise ValueError(f"{type(self).__name__}.apply: got {len(grads)} gradients for {len(params)} variables")
        for param, g in zip(params, grads):
            param.grad = None if g is None else getattr(g, "data", g)
        try:
            self.step(params)
        finally:
            for param in params:
                param.grad = None

    def apply_gradients(self, grads_and_vars) -> None:
        """``apply`` on ``(gradient, variable)`` pairs, as Keras'."""
        pairs = list(grads_and_vars)
        self.apply([g for g, _ in pairs], [v for _, v in pairs])
