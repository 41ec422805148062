"""Training cases shared by the Keras-reference tests and their device twins: data, and magmadnn models for each loss
(magmadnn only: the device twins run where Keras is not installed)."""

from __future__ import annotations

import warnings

import numpy as np

import magmadnn as mdnn
from magmadnn import layers as L
from magmadnn import metrics

RNG = np.random.default_rng(0)
X = RNG.standard_normal((48, 5)).astype(np.float32)
Y = RNG.integers(0, 3, 48)
YB = (Y == 1).astype(np.float32)
X_VAL, Y_VAL, YB_VAL = X[:13], Y[:13], YB[:13]

# (loss, targets, validation targets, activation, units, metrics)
TRAIN = {
    "sparse": ("sparse_categorical_crossentropy", Y, Y_VAL, "softmax", 3,
               ["accuracy", "SparseTopKCategoricalAccuracy"]),
    "categorical": ("categorical_crossentropy", np.eye(3)[Y], np.eye(3)[Y_VAL], "softmax", 3,
                    ["accuracy", "categorical_accuracy", "TopKCategoricalAccuracy"]),
    "categorical_logits": (lambda k: k.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=0.1),
                           np.eye(3)[Y], np.eye(3)[Y_VAL], None, 3, ["categorical_accuracy"]),
    "binary": ("binary_crossentropy", YB, YB_VAL, "sigmoid", 1,
               ["accuracy", "binary_accuracy", "Precision", "Recall", "AUC"]),
    "binary_logits": (lambda k: k.losses.BinaryCrossentropy(from_logits=True), YB, YB_VAL, None, 1, ["mae", "mse"]),
    "mse": ("mse", YB, YB_VAL, None, 1, ["mae", "RootMeanSquaredError"]),
    "mae": ("mae", Y.astype(np.float32), Y_VAL.astype(np.float32), None, 1, ["mse"]),
    "huber": ("huber", Y.astype(np.float32), Y_VAL.astype(np.float32), None, 1, []),
    "log_cosh": ("log_cosh", Y.astype(np.float32), Y_VAL.astype(np.float32), None, 1, []),
    "kld": ("kld", np.eye(3)[Y], np.eye(3)[Y_VAL], "softmax", 3, []),
}
CLASS_METRICS = {"Precision": {}, "Recall": {}, "AUC": {}, "RootMeanSquaredError": {},
                 "SparseTopKCategoricalAccuracy": {"k": 2}, "TopKCategoricalAccuracy": {"k": 2}}


def metric_objects(module, names):
    """``names`` as the metrics list of ``compile`` for ``module`` (magmadnn.metrics or keras.metrics)."""
    return [getattr(module, m)(**CLASS_METRICS[m]) if m in CLASS_METRICS else m for m in names]


def model_for(name, device="host", graph=False):
    loss, _, _, act, units, names = TRAIN[name]
    model = mdnn.Sequential([L.Input((5,)), L.Dense(units, activation=act)], seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the probability-vs-logits advice, tested on its own
        model.compile(mdnn.optimizers.SGD(0.1), loss=loss(mdnn) if callable(loss) else loss,
                      metrics=metric_objects(metrics, names), device=device, graph=graph)
    return model
