"""Day-two Keras programs (fit's less common arguments, callbacks on them) written twice, for Keras 3 (torch
backend) and magmadnn, from identical initial weights without shuffling: histories must agree, or magmadnn must
raise a clear error naming the Keras way and its own."""

from __future__ import annotations

import warnings

import pytest

from magmadnn import callbacks as C
from tests.keras_reference import keras
from tests.magmadnn.suites.test_keras_day_one import X, Y, compile_both, fit_both, mlp, same_weights, twins


@pytest.mark.parametrize("freq", [2, [1, 4]])
@pytest.mark.parametrize("callback", [None, "EarlyStopping", "ReduceLROnPlateau"])
def test_validation_freq_validates_the_epochs_keras_does(freq, callback):
    ours, theirs = twins(*mlp(3, "softmax"))
    compile_both(ours, theirs, "adam", "sparse_categorical_crossentropy", ["accuracy"])

    def callbacks(module):
        if callback is None:
            return []
        kwargs = {"patience": 0} if callback == "EarlyStopping" else {"patience": 0, "min_delta": 1.0}
        return [getattr(module, callback)(**kwargs)]

    kwargs = {"epochs": 5, "validation_split": 0.25, "validation_freq": freq, "shuffle": False, "verbose": 0,
              "batch_size": 16}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # both warn that the epochs without validation lack val_loss
        mine = ours.fit(X, Y, callbacks=callbacks(C), **kwargs)
        ref = theirs.fit(X, Y, callbacks=callbacks(keras.callbacks), **kwargs)
    assert list(mine.history) == list(ref.history)
    for key in ref.history:
        assert len(mine.history[key]) == len(ref.history[key]), key
        for a, b in zip(mine.history[key], ref.history[key], strict=True):
            assert a == pytest.approx(b, rel=2e-4, abs=2e-5), key
    assert mine.epoch == ref.epoch
    same_weights(ours, theirs)


def test_validation_freq_checks_its_value_and_steps_per_epoch_names_the_alternative():
    ours, theirs = twins(*mlp(3, "softmax"))
    compile_both(ours, theirs, "adam", "sparse_categorical_crossentropy")
    for bad in (0, "2", 1.5):
        with pytest.raises(ValueError, match="validation_freq"):
            ours.fit(X, Y, epochs=1, verbose=0, validation_split=0.25, validation_freq=bad)
    with pytest.raises(ValueError, match=r"steps_per_epoch.*x\[:steps_per_epoch \* batch_size\]"):
        ours.fit(X, Y, epochs=1, verbose=0, steps_per_epoch=2)
    fit_both(ours, theirs, X, Y, epochs=2, validation_split=0.25, validation_freq=1)


def test_to_json_model_from_json_and_clone_model_as_keras():
    import numpy as np

    import magmadnn as mdnn

    ours, theirs = twins(*mlp(3, "softmax"))
    compile_both(ours, theirs, "adam", "sparse_categorical_crossentropy")
    fit_both(ours, theirs, X, Y, epochs=1)
    for fresh, ref in ((mdnn.models.model_from_json(ours.to_json()), keras.models.model_from_json(theirs.to_json())),
                       (mdnn.models.clone_model(ours), keras.models.clone_model(theirs))):
        assert fresh is not ours and fresh.count_params() == ref.count_params() == ours.count_params()
        assert [w.shape for w in fresh.get_weights()] == [tuple(w.shape) for w in ref.get_weights()]
        # new layers, weights not shared: a change to the copy leaves the original alone (as Keras)
        fresh.set_weights([w + 1 for w in ours.get_weights()])
        assert not np.array_equal(fresh.get_weights()[0], ours.get_weights()[0])
        assert all(a is not b for a, b in zip(fresh.layers, ours.layers))
    untrained, _ = twins(*mlp(3, "softmax"))
    clone, keras_clone = mdnn.models.clone_model(untrained), keras.models.clone_model(theirs)
    # both draw new weights: the clone of an untrained model does not start where the original did
    assert not np.array_equal(clone.get_weights()[0], untrained.get_weights()[0])
    assert not np.array_equal(keras_clone.get_weights()[0], theirs.get_weights()[0])
    with pytest.raises(ValueError, match="clone_function"):
        mdnn.models.clone_model(ours, clone_function=lambda layer: layer)
