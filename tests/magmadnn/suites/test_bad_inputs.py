"""A user's mistakes and faults: one row per bad input (the call, the exception type, words the message must hold).

Every row runs a real call of the public API on a fresh small model, file or dataset; the message must name what was
wrong. The tests after the matrix check what a row cannot: loads that fail leave the model bit-identical, a resumed
``ModelCheckpoint(save_best_only=True)`` keeps the best file, training stops on non-finite parameters naming the layer,
and the CLI's one-line errors.
"""

from __future__ import annotations

import gzip
import math
import re
import struct

import numpy as np
import pytest

from magmadnn import cli, data, functional, initializers, losses, metrics, models, optimizers, saving, schedules, zoo
from magmadnn import layers as L
from magmadnn.backend import get as backend_get  # the host backend of the metric rows
from magmadnn.callbacks import Callback, EarlyStopping, LearningRateScheduler, ModelCheckpoint, TerminateOnNaN
from magmadnn.data import DataLoader, DatasetError
from magmadnn.layers.base import Layer, ShapeMismatchError
from magmadnn.models import ArchitectureMismatchError, ModelFileError, NonFiniteParameterError, Sequential
from tests.magmadnn.suites.test_devices import gpu  # noqa: F401  (fixture: stand-in GPUs that count device-to-host reads)

NAN, INF = float("nan"), float("inf")


# ------------------------------------------------------------------------------------------------------ helpers


def xy(n=16, features=4, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, features)).astype(np.float32), rng.integers(0, classes, n)


def mlp(optimizer="sgd", loss="cross_entropy", seed=0):
    model = Sequential([L.Input((4,)), L.Dense(5, activation="relu"), L.Dense(3)], seed=seed)
    return model.compile(optimizer, loss, metrics=["accuracy"])


def fit(**kwargs):
    x, y = xy()
    args = {"x": x, "y": y, "batch_size": 4, "epochs": 1, "verbose": 0, **kwargs}
    return mlp().fit(**args)


def with_x(change):
    x, y = xy()
    x = x.astype(object) if change == "object" else x.copy()
    if change == "nan":
        x[3, 1] = NAN
    elif change == "inf":
        x[5, 0] = -INF
    elif change == "complex":
        x = x.astype(np.complex64)
    return x, y


def one_hot(y, classes=3):
    return np.eye(classes, dtype=np.float32)[y]


def trained_checkpoint(tmp, optimizer="adam"):
    model = mlp(optimizer)
    x, y = xy()
    model.fit(x, y, batch_size=4, epochs=1, verbose=0)
    return model, model.save_checkpoint(tmp / "ckpt.npz")


def tampered(tmp, edit, kind="checkpoint"):
    """A checkpoint (or model file) of ``mlp("adam")`` rewritten after ``edit(tensors, meta)``."""
    model, path = trained_checkpoint(tmp)
    if kind == "model":
        path = model.save(tmp / "model.npz")
    tensors, meta = saving.read_file(path)
    edit(tensors, meta)
    meta = {k: v for k, v in meta.items() if k not in ("format", "version")}
    return saving.write_file(path, tensors, meta)


def drop(key):
    return lambda tensors, meta: tensors.pop(key)


def put(key, value):
    def edit(tensors, meta):
        tensors[key] = value(tensors[key]) if callable(value) else value
    return edit


def meta_set(path, value):
    def edit(tensors, meta):
        node = meta
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = value
    return edit


def truncated(tmp):
    _, path = trained_checkpoint(tmp)
    return write_bytes(tmp, "cut.npz", open(path, "rb").read()[:300])


def write_bytes(tmp, name, payload):
    path = tmp / name
    path.write_bytes(payload)
    return path


def idx_bytes(type_code, shape, payload=b""):
    return bytes([0, 0, type_code, len(shape)]) + struct.pack(f">{len(shape)}I", *shape) + payload


def mnist_test_only(tmp, labels_type=0x08):
    """A folder holding only a 10-image t10k pair (labels of IDX type ``labels_type``)."""
    images = idx_bytes(0x08, (10, 28, 28), bytes(10 * 28 * 28))
    dtype = np.dtype({0x08: ">u1", 0x0D: ">f4"}[labels_type])
    labels = idx_bytes(labels_type, (10,), (np.arange(10) % 10).astype(dtype).tobytes())
    (tmp / "t10k-images-idx3-ubyte.gz").write_bytes(gzip.compress(images))
    (tmp / "t10k-labels-idx1-ubyte.gz").write_bytes(gzip.compress(labels))
    return tmp


class Recorder(Callback):
    def __init__(self):
        self.epochs = 0

    def on_epoch_end(self, epoch, logs=None):
        self.epochs += 1


def fit_with(callback):
    x, y = xy()
    recorder = Recorder()
    try:
        mlp().fit(x, y, batch_size=4, epochs=2, verbose=0, callbacks=[callback, recorder])
    finally:
        assert recorder.epochs == 0  # the mistake was reported before the first epoch ran


def step_with_lr(lr_fn):
    model = mlp(optimizers.SGD(lr_fn))
    model.train_on_batch(*xy(4))


# ------------------------------------------------------------------------------------------------------- matrix

ROWS = [
    # -- layers: sizes are integers (NumPy integers too), rates and constants are finite numbers
    ("dense-units-0", lambda t: L.Dense(0), ValueError, ["units", ">= 1", "0"]),
    ("dense-units-negative", lambda t: L.Dense(-3), ValueError, ["units", "-3"]),
    ("dense-units-float", lambda t: L.Dense(2.5), TypeError, ["units", "2.5", "integer"]),
    ("dense-units-str", lambda t: L.Dense("10"), TypeError, ["units", "'10'"]),
    ("dense-units-bool", lambda t: L.Dense(True), TypeError, ["units", "True"]),
    ("dense-units-np-float", lambda t: L.Dense(np.float32(4)), TypeError, ["units", "integer"]),
    ("dense-activation", lambda t: L.Dense(3, activation="relux"), ValueError, ["unknown activation", "relux"]),
    ("dense-initializer", lambda t: L.Dense(3, kernel_initializer="lecun"), ValueError, ["initializer", "lecun"]),
    ("conv-filters-0", lambda t: L.Conv2D(0, 3), ValueError, ["filters", ">= 1"]),
    ("conv-filters-float", lambda t: L.Conv2D(4.0, 3), TypeError, ["filters", "4.0"]),
    ("conv-kernel-0", lambda t: L.Conv2D(4, 0), ValueError, ["kernel_size", ">= 1"]),
    ("conv-kernel-triple", lambda t: L.Conv2D(4, (3, 3, 3)), ValueError, ["kernel_size", "pair"]),
    ("conv-kernel-float", lambda t: L.Conv2D(4, 2.5), ValueError, ["kernel_size", "2.5"]),
    ("conv-strides-0", lambda t: L.Conv2D(4, 3, strides=0), ValueError, ["strides", ">= 1"]),
    ("conv-padding-name", lambda t: L.Conv2D(4, 3, padding="full"), ValueError, ["padding", "'full'"]),
    ("conv-padding-negative", lambda t: L.Conv2D(4, 3, padding=-1), ValueError, ["padding", ">= 0"]),
    ("conv-dilation-0", lambda t: L.Conv2D(4, 3, dilation=0), ValueError, ["dilation", ">= 1"]),
    ("conv-activation", lambda t: L.Conv2D(4, 3, activation="swishy"), ValueError, ["activation", "swishy"]),
    ("maxpool-0", lambda t: L.MaxPool2D(0), ValueError, ["pool_size", ">= 1"]),
    ("avgpool-strides", lambda t: L.AvgPool2D(2, strides=-1), ValueError, ["strides", "-1"]),
    ("dropout-1", lambda t: L.Dropout(1.0), ValueError, ["rate", "1.0", "[0.0, 1.0)"]),
    ("dropout-negative", lambda t: L.Dropout(-0.1), ValueError, ["rate", "-0.1"]),
    ("dropout-str", lambda t: L.Dropout("0.5"), TypeError, ["rate", "'0.5'"]),
    ("dropout-nan", lambda t: L.Dropout(NAN), ValueError, ["rate", "nan"]),
    ("batchnorm-momentum", lambda t: L.BatchNorm(momentum=1.0), ValueError, ["momentum", "1.0"]),
    ("batchnorm-eps-0", lambda t: L.BatchNorm(eps=0), ValueError, ["eps", "0"]),
    ("batchnorm-eps-inf", lambda t: L.BatchNorm(eps=INF), ValueError, ["eps", "inf"]),
    ("activation-name", lambda t: L.Activation("nope"), ValueError, ["unknown activation", "nope"]),
    ("activation-none", lambda t: L.Activation(None), ValueError, ["kind"]),
    ("activation-alpha", lambda t: L.Activation("elu", alpha="x"), TypeError, ["alpha", "'x'"]),
    ("input-zero", lambda t: L.Input((0, 3)), ValueError, ["shape", "(0, 3)"]),
    ("input-float", lambda t: L.Input((2.5,)), TypeError, ["shape", "2.5"]),
    ("input-negative", lambda t: L.Input((-1,)), ValueError, ["shape", "positive sizes"]),  # () is Keras' scalar
    ("input-str", lambda t: L.Input("abc"), TypeError, ["shape", "'abc'"]),
    ("layer-name", lambda t: L.Dense(3, name=""), TypeError, ["name", "non-empty"]),
    ("dense-list", lambda t: L.Dense(3)([L.Input((3,)), L.Input((3,))]), ShapeMismatchError,
     ["Dense", "one input", "(3,)"]),
    ("conv-rank", lambda t: Sequential([L.Input((8,)), L.Conv2D(2, 3)]), ShapeMismatchError, ["(C, H, W)", "(8,)"]),
    ("conv-too-small", lambda t: Sequential([L.Input((1, 2, 2)), L.Conv2D(1, 3)]), ShapeMismatchError,
     ["kernel", "(3, 3)"]),
    ("add-shapes", lambda t: L.Add()([L.Input((3,)), L.Input((4,))]), ShapeMismatchError, ["one shape", "(4,)"]),
    ("add-one-input", lambda t: L.Add()(L.Input((3,))), ShapeMismatchError, ["at least two"]),
    # -- conv/shape layers
    ("convt-filters-0", lambda t: L.Conv2DTranspose(0, 3), ValueError, ["Conv2DTranspose", "filters", ">= 1"]),
    ("convt-output-padding", lambda t: L.Conv2DTranspose(2, 3, strides=2, output_padding=2), ValueError,
     ["Conv2DTranspose", "output_padding", "smaller than strides (2, 2)"]),
    ("convt-same-output-padding", lambda t: L.Conv2DTranspose(2, 3, strides=2, padding="same", output_padding=1),
     ValueError, ["Conv2DTranspose", "output_padding must be 0", "'same'"]),
    ("convt-padding-name", lambda t: L.Conv2DTranspose(2, 3, padding="full"), ValueError,
     ["Conv2DTranspose", "padding", "'full'"]),
    ("convt-rank", lambda t: Sequential([L.Input((8,)), L.Conv2DTranspose(2, 3)]), ShapeMismatchError,
     ["Conv2DTranspose", "(C, H, W)", "(8,)"]),
    ("convt-channels", lambda t: functional.conv_transpose2d(np.zeros((1, 2, 3, 3)), np.zeros((3, 1, 2, 2))),
     ValueError, ["conv_transpose2d", "expected x of shape (N, 3, H, W)"]),
    ("conv-groups-0", lambda t: L.Conv2D(4, 3, groups=0), ValueError, ["Conv2D", "groups", ">= 1"]),
    ("conv-groups-filters", lambda t: L.Conv2D(3, 3, groups=2), ValueError,
     ["Conv2D", "filters (3)", "multiple of groups (2)"]),
    ("conv-groups-channels", lambda t: Sequential([L.Input((3, 5, 5)), L.Conv2D(4, 3, groups=2)]),
     ShapeMismatchError, ["Conv2D", "divisible by groups=2", "(3, 5, 5)"]),
    ("depthwise-multiplier-0", lambda t: L.DepthwiseConv2D(3, depth_multiplier=0), ValueError,
     ["DepthwiseConv2D", "depth_multiplier", ">= 1"]),
    ("depthwise-rank", lambda t: Sequential([L.Input((4, 4)), L.DepthwiseConv2D(3)]), ShapeMismatchError,
     ["DepthwiseConv2D", "(C, H, W)", "(4, 4)"]),
    ("concatenate-batch-axis", lambda t: L.Concatenate(axis=0), ValueError, ["Concatenate", "axis 0", "batch axis"]),
    ("concatenate-axis-float", lambda t: L.Concatenate(axis=1.0), TypeError, ["Concatenate", "axis", "1.0"]),
    ("concatenate-shapes", lambda t: L.Concatenate(axis=1)([L.Input((2, 3)), L.Input((2, 4))]), ShapeMismatchError,
     ["Concatenate", "match except along axis 1", "(2, 4)"]),
    ("concatenate-axis-range", lambda t: L.Concatenate(axis=3)([L.Input((2,)), L.Input((2,))]), ShapeMismatchError,
     ["Concatenate", "axis 3", "(2,)"]),
    ("concatenate-one-input", lambda t: L.Concatenate()(L.Input((3,))), ShapeMismatchError,
     ["Concatenate", "at least two"]),
    ("concatenate-function-shapes", lambda t: functional.concatenate([np.zeros((2, 3)), np.zeros((3, 4))], axis=1),
     ValueError, ["concatenate", "equal except along axis 1"]),
    ("reshape-two-unknown", lambda t: L.Reshape((-1, -1)), ValueError, ["Reshape", "target_shape", "at most one -1"]),
    ("reshape-zero", lambda t: L.Reshape((0, 4)), ValueError, ["Reshape", "target_shape", ">= 1"]),
    ("reshape-str", lambda t: L.Reshape("3x4"), TypeError, ["Reshape", "target_shape", "'3x4'"]),
    ("reshape-size", lambda t: Sequential([L.Input((3, 4)), L.Reshape((5, 2))]), ShapeMismatchError,
     ["Reshape", "10 values per sample", "(5, 2)", "(3, 4)"]),
    ("reshape-unknown-size", lambda t: Sequential([L.Input((3, 4)), L.Reshape((-1, 5))]), ShapeMismatchError,
     ["Reshape", "a multiple of 5", "(3, 4)"]),
    ("permute-zero-based", lambda t: L.Permute((0, 1)), ValueError, ["Permute", "dims", "permutation of 1..2"]),
    ("permute-repeated", lambda t: L.Permute((1, 1, 2)), ValueError, ["Permute", "dims", "(1, 1, 2)"]),
    ("permute-rank", lambda t: Sequential([L.Input((3, 4)), L.Permute((2, 3, 1))]), ShapeMismatchError,
     ["Permute", "rank 3", "(3, 4)"]),
    ("upsampling-interpolation", lambda t: L.UpSampling2D(2, interpolation="bilinear"), ValueError,
     ["UpSampling2D", "interpolation", "'nearest'", "'bilinear'"]),
    ("upsampling-size-0", lambda t: L.UpSampling2D(0), ValueError, ["UpSampling2D", "size", ">= 1"]),
    ("upsampling-rank", lambda t: Sequential([L.Input((4, 4)), L.UpSampling2D()]), ShapeMismatchError,
     ["UpSampling2D", "(C, H, W)", "(4, 4)"]),
    ("global-max-pool-rank", lambda t: Sequential([L.Input((4,)), L.GlobalMaxPool2D()]), ShapeMismatchError,
     ["GlobalMaxPool2D", "(C, H, W)", "(4,)"]),
    # -- models: construction and compile
    ("sequential-not-layer", lambda t: Sequential([L.Dense(3), "relu"]), TypeError, ["Layer instances", "str"]),
    ("sequential-input-later", lambda t: Sequential([L.Dense(3), L.Input((3,))]), ValueError, ["Input", "first"]),
    ("model-dtype", lambda t: Sequential([L.Input((3,))], dtype="float16"), TypeError, ["float32", "float16"]),
    ("model-duplicate-names", lambda t: Sequential([L.Input((3,)), L.Dense(3, name="d"), L.Dense(3, name="d")]),
     ValueError, ["unique", "'d'"]),
    ("model-input-not-input", lambda t: models.Model(L.Dense(3), L.Input((3,))), TypeError, ["Input layers"]),
    ("compile-optimizer", lambda t: mlp("adamx"), ValueError, ["unknown optimizer", "adamx"]),
    ("compile-loss", lambda t: mlp(loss="hinge"), ValueError, ["unknown loss", "hinge"]),
    ("compile-metric", lambda t: mlp().compile("sgd", metrics=["f1"]), ValueError, ["unknown metric", "f1"]),
    ("compile-optimizer-type", lambda t: mlp(3), TypeError, ["optimizer", "3"]),
    ("fit-not-compiled", lambda t: Sequential([L.Input((4,)), L.Dense(3)]).fit(*xy()), RuntimeError, ["compile"]),
    ("summary-not-built", lambda t: Sequential([L.Dense(3)]).summary(), RuntimeError, ["not built"]),
    # -- fit arguments
    ("fit-batch-0", lambda t: fit(batch_size=0), ValueError, ["batch_size", ">= 1", "0"]),
    ("fit-batch-negative", lambda t: fit(batch_size=-1), ValueError, ["batch_size", "-1"]),
    ("fit-batch-float", lambda t: fit(batch_size=32.0), TypeError, ["batch_size", "32.0", "integer"]),
    ("fit-batch-str", lambda t: fit(batch_size="32"), TypeError, ["batch_size", "'32'"]),
    ("fit-batch-bool", lambda t: fit(batch_size=True), TypeError, ["batch_size", "True"]),
    ("fit-epochs-float", lambda t: fit(epochs=2.5), TypeError, ["epochs", "2.5"]),
    ("fit-epochs-negative", lambda t: fit(epochs=-1), ValueError, ["epochs", "-1"]),
    ("fit-epochs-0", lambda t: fit(epochs=0), ValueError, ["runs no epoch", "epochs=0"]),
    ("fit-initial-after-epochs", lambda t: fit(epochs=2, initial_epoch=5), ValueError,
     ["runs no epoch", "epochs=2", "initial_epoch=5"]),
    ("fit-initial-negative", lambda t: fit(initial_epoch=-1), ValueError, ["initial_epoch", "-1"]),
    ("fit-split-str", lambda t: fit(validation_split="0.2"), TypeError, ["validation_split", "'0.2'"]),
    ("fit-split-1", lambda t: fit(validation_split=1.0), ValueError, ["validation_split", "1.0"]),
    ("fit-split-negative", lambda t: fit(validation_split=-0.1), ValueError, ["validation_split", "-0.1"]),
    ("fit-split-nan", lambda t: fit(validation_split=NAN), ValueError, ["validation_split", "nan"]),
    ("fit-split-empty", lambda t: fit(validation_split=0.99), ValueError, ["validation_split", "empty split"]),
    ("fit-callbacks-single", lambda t: fit(callbacks=EarlyStopping("loss")), TypeError,
     ["callbacks", "list", "EarlyStopping"]),
    ("fit-callbacks-str", lambda t: fit(callbacks="history"), TypeError, ["callbacks", "'history'"]),
    ("fit-callbacks-function", lambda t: fit(callbacks=[print]), TypeError, ["Callback instances", "print"]),
    ("fit-verbose", lambda t: fit(verbose=-1), ValueError, ["verbose", "-1"]),
    ("fit-shuffle", lambda t: fit(shuffle="yes"), TypeError, ["shuffle", "'yes'"]),
    ("fit-validation-data", lambda t: fit(validation_data=(xy()[0],)), ValueError, ["validation_data", "pair"]),
    ("fit-no-targets", lambda t: mlp().fit(xy()[0], None, verbose=0), ValueError, ["targets y are required"]),
    ("fit-loader-and-y", lambda t: mlp().fit(DataLoader(*xy()), xy()[1], verbose=0), ValueError, ["y=None"]),
    # -- fit data: checked once per call, before any batch
    ("fit-empty", lambda t: fit(x=np.zeros((0, 4), np.float32), y=np.zeros(0, int)), ValueError,
     ["no samples", "(0, 4)"]),
    ("fit-nan-x", lambda t: fit(x=with_x("nan")[0]), ValueError, ["inputs x", "non-finite", "nan", "(3, 1)"]),
    ("fit-inf-x", lambda t: fit(x=with_x("inf")[0]), ValueError, ["inputs x", "non-finite", "-inf"]),
    ("fit-nan-onehot", lambda t: fit(y=np.where(np.arange(48).reshape(16, 3) == 7, NAN, one_hot(xy()[1]))),
     ValueError, ["targets", "non-finite", "(2, 1)"]),
    ("fit-negative-onehot", lambda t: fit(y=one_hot(xy()[1]) - 0.5), ValueError, ["one-hot", ">= 0", "-0.5"]),
    ("fit-label-range", lambda t: fit(y=xy()[1] + 3), ValueError, ["labels", "[0, 3)"]),
    ("fit-label-negative", lambda t: fit(y=xy()[1] - 1), ValueError, ["labels", "[0, 3)", "-1"]),
    ("fit-float-labels", lambda t: fit(y=xy()[1].astype(np.float32)), TypeError, ["integer class indices", "float32"]),
    ("fit-str-labels", lambda t: fit(y=xy()[1].astype(str)), TypeError, ["targets", "real numbers"]),
    ("fit-complex-x", lambda t: fit(x=with_x("complex")[0]), TypeError, ["model input", "complex64"]),
    ("fit-object-x", lambda t: fit(x=with_x("object")[0]), TypeError, ["model input", "object"]),
    ("fit-x-shape", lambda t: fit(x=np.zeros((16, 5), np.float32)), ShapeMismatchError, ["(N, 4)", "(16, 5)"]),
    ("fit-count-mismatch", lambda t: fit(y=xy()[1][:10]), ValueError, ["16 samples", "(10,)"]),
    ("fit-onehot-columns", lambda t: fit(y=one_hot(xy()[1], 4)), ValueError, ["4 columns", "3 outputs"]),
    ("fit-targets-3d", lambda t: fit(y=np.zeros((16, 3, 1))), ValueError, ["targets", "(16, 3, 1)"]),
    ("fit-validation-nan", lambda t: fit(validation_data=with_x("nan")), ValueError,
     ["fit (validation_data)", "non-finite"]),
    ("fit-mse-shape", lambda t: mlp(loss="mse").fit(xy()[0], np.zeros((16, 2)), verbose=0), ValueError,
     ["mse", "(2,)", "(3,)"]),
    ("fit-ce-image-output", lambda t: Sequential([L.Input((1, 4, 4)), L.Conv2D(2, 3)]).compile().fit(
        np.zeros((2, 1, 4, 4)), np.zeros(2, int), verbose=0), ValueError, ["cross_entropy", "Flatten"]),
    ("fit-loader-nan", lambda t: mlp().fit(DataLoader(*with_x("nan")), verbose=0), ValueError, ["non-finite"]),
    # -- evaluate / predict / train_on_batch
    ("evaluate-batch-0", lambda t: mlp().evaluate(*xy(), batch_size=0), ValueError, ["evaluate", "batch_size"]),
    ("evaluate-batch-float", lambda t: mlp().evaluate(*xy(), batch_size=8.0), TypeError, ["batch_size", "8.0"]),
    ("evaluate-empty", lambda t: mlp().evaluate(np.zeros((0, 4)), np.zeros(0, int)), ValueError,
     ["evaluate", "no samples"]),
    ("evaluate-empty-loader", lambda t: mlp().evaluate(DataLoader(np.zeros((0, 4)), np.zeros(0, int))),
     ValueError, ["evaluate", "no samples"]),
    ("evaluate-nan", lambda t: mlp().evaluate(*with_x("nan")), ValueError, ["evaluate", "non-finite"]),
    ("evaluate-no-targets", lambda t: mlp().evaluate(xy()[0]), ValueError, ["targets y are required"]),
    ("evaluate-labels", lambda t: mlp().evaluate(xy()[0], xy()[1] + 5), ValueError, ["labels", "[0, 3)"]),
    ("predict-batch-negative", lambda t: mlp().predict(xy()[0], batch_size=-1), ValueError,
     ["predict", "batch_size", "-1"]),
    ("predict-batch-0", lambda t: mlp().predict(xy()[0], batch_size=0), ValueError, ["predict", "batch_size"]),
    ("predict-batch-float", lambda t: mlp().predict(xy()[0], batch_size=2.0), TypeError, ["batch_size", "2.0"]),
    ("predict-shape", lambda t: mlp().predict(np.zeros((2, 3))), ShapeMismatchError, ["(N, 4)", "(2, 3)"]),
    ("predict-str", lambda t: mlp().predict(np.array([["a"] * 4])), TypeError, ["model input", "real numbers"]),
    ("train-on-batch-empty", lambda t: mlp().train_on_batch(np.zeros((0, 4)), np.zeros(0, int)), ValueError,
     ["train_on_batch", "no samples"]),
    ("train-on-batch-nan", lambda t: mlp().train_on_batch(*with_x("nan")), ValueError,
     ["train_on_batch", "non-finite"]),
    ("train-on-batch-labels", lambda t: mlp().train_on_batch(xy()[0], xy()[1] * 9), ValueError, ["labels"]),
    # -- callbacks: arguments, and keys checked when training begins (before any epoch)
    ("earlystop-patience-negative", lambda t: EarlyStopping(patience=-1), ValueError, ["patience", "-1"]),
    ("earlystop-patience-float", lambda t: EarlyStopping(patience=1.5), TypeError, ["patience", "1.5"]),
    ("earlystop-mode", lambda t: EarlyStopping(mode="best"), ValueError, ["mode", "'best'"]),
    ("earlystop-min-delta", lambda t: EarlyStopping(min_delta="0.1"), TypeError, ["min_delta"]),
    ("earlystop-monitor-type", lambda t: EarlyStopping(monitor=3), TypeError, ["monitor", "3"]),
    ("earlystop-val-without-validation", lambda t: fit_with(EarlyStopping("val_loss")), KeyError,
     ["val_loss", "validation_split"]),
    ("checkpoint-key-without-validation", lambda t: fit_with(ModelCheckpoint(t / "m-{val_loss:.3f}.npz")),
     KeyError, ["val_loss", "validation"]),
    ("checkpoint-unknown-key", lambda t: fit_with(ModelCheckpoint(t / "m-{acc}.npz")), KeyError, ["acc"]),
    ("checkpoint-monitor-without-validation", lambda t: fit_with(
        ModelCheckpoint(t / "m.npz", monitor="val_accuracy", save_best_only=True)), KeyError, ["val_accuracy"]),
    ("checkpoint-positional", lambda t: ModelCheckpoint(t / "m-{}.npz"), ValueError, ["positional"]),
    ("checkpoint-format", lambda t: ModelCheckpoint(t / "m-{epoch.npz"), ValueError, ["format string"]),
    ("checkpoint-extension", lambda t: ModelCheckpoint(t / "m.txt"), ValueError, [".npz", "m.txt"]),
    ("checkpoint-threshold", lambda t: ModelCheckpoint(t / "m.npz", initial_value_threshold="1"), TypeError,
     ["initial_value_threshold"]),
    ("checkpoint-threshold-nan", lambda t: ModelCheckpoint(t / "m.npz", initial_value_threshold=NAN), ValueError,
     ["initial_value_threshold", "nan"]),
    ("checkpoint-monitor-type", lambda t: ModelCheckpoint(t / "m.npz", monitor=None), TypeError, ["monitor"]),
    ("scheduler-not-callable", lambda t: LearningRateScheduler(0.1), TypeError, ["callable", "0.1"]),
    ("scheduler-inf", lambda t: fit(callbacks=[LearningRateScheduler(lambda epoch: INF)]), ValueError,
     ["learning rate", "inf"]),
    # -- optimizers and schedules: finite values in range
    ("sgd-lr-inf", lambda t: optimizers.SGD(INF), ValueError, ["lr", "inf"]),
    ("sgd-lr-negative", lambda t: optimizers.SGD(-0.1), ValueError, ["lr", "-0.1"]),
    ("sgd-lr-str", lambda t: optimizers.SGD("0.1"), TypeError, ["learning rate", "'0.1'"]),
    ("sgd-momentum-1", lambda t: optimizers.SGD(momentum=1.0), ValueError, ["momentum", "1.0"]),
    ("sgd-nesterov", lambda t: optimizers.SGD(nesterov=True), ValueError, ["nesterov", "momentum"]),
    ("adam-beta1", lambda t: optimizers.Adam(beta1=1.0), ValueError, ["beta1", "1.0"]),
    ("adam-eps-0", lambda t: optimizers.Adam(eps=0), ValueError, ["eps"]),
    ("adam-beta2-str", lambda t: optimizers.Adam(beta2="x"), TypeError, ["beta2", "'x'"]),
    ("rmsprop-rho-nan", lambda t: optimizers.RMSProp(rho=NAN), ValueError, ["rho", "nan"]),
    ("adamw-decay-negative", lambda t: optimizers.AdamW(weight_decay=-1), ValueError, ["weight_decay", "-1"]),
    ("cosine-lr-inf", lambda t: schedules.CosineDecay(INF, 10), ValueError,
     ["CosineDecay", "initial_learning_rate", "inf"]),
    ("cosine-steps-0", lambda t: schedules.CosineDecay(0.1, 0), ValueError, ["decay_steps", "0"]),
    ("cosine-steps-float", lambda t: schedules.CosineDecay(0.1, 10.5), TypeError, ["decay_steps", "10.5"]),
    ("cosine-alpha", lambda t: schedules.CosineDecay(0.1, 10, alpha=2), ValueError, ["alpha", "2"]),
    ("cosine-warmup", lambda t: schedules.CosineDecay(0.1, 10, warmup_steps=-1), ValueError, ["warmup_steps"]),
    ("stepdecay-size-0", lambda t: schedules.StepDecay(0.1, 0), ValueError, ["step_size"]),
    ("stepdecay-gamma-nan", lambda t: schedules.StepDecay(0.1, 2, gamma=NAN), ValueError, ["gamma", "nan"]),
    ("constant-nan", lambda t: schedules.Constant(NAN), ValueError, ["lr", "nan"]),
    ("schedule-dict", lambda t: schedules.get({"class_name": "CosineDecay", "config": {"initial_lr": -1,
                                                                                     "decay_steps": 3}}),
     ValueError, ["initial_lr", "-1"]),
    ("optimizer-step-lr-inf", lambda t: step_with_lr(lambda step: INF), ValueError,
     ["learning rate at step 0", "inf", "schedule"]),
    # -- losses, metrics, initializers, functional
    ("topk-0", lambda t: metrics.TopK(0), ValueError, ["k", ">= 1"]),
    ("topk-float", lambda t: metrics.TopK(2.0), TypeError, ["k", "2.0"]),
    ("loss-reduction", lambda t: losses.MSE("avg"), ValueError, ["reduction", "'avg'"]),
    ("initializer-constant", lambda t: initializers.Constant("a"), TypeError, ["value", "'a'"]),
    ("initializer-name", lambda t: initializers.get("lecun"), ValueError, ["initializer", "lecun"]),
    ("functional-ce-range", lambda t: functional.softmax_cross_entropy(np.zeros((2, 3), np.float32),
                                                                      np.array([0, 3])), ValueError,
     ["labels must be in [0, 3)"]),
    ("functional-ce-float-labels", lambda t: functional.softmax_cross_entropy(np.zeros((2, 3), np.float32),
                                                                             np.array([0.0, 1.0])), TypeError,
     ["integer class indices"]),
    ("functional-ce-onehot-shape", lambda t: functional.softmax_cross_entropy(np.zeros((2, 3), np.float32),
                                                                             np.zeros((2, 4))), ValueError,
     ["one-hot", "(2, 4)"]),
    # -- loads: a clear typed error (the atomicity test below checks that nothing changed)
    ("load-missing-array", lambda t: mlp().load_weights(tampered(t, drop("layers.1.kernel"), "model")),
     ArchitectureMismatchError, ["no array", "'kernel'"]),
    ("load-wrong-shape", lambda t: mlp().load_weights(tampered(t, put("layers.2.bias", np.zeros(4)), "model")),
     ArchitectureMismatchError, ["'bias'", "(4,)", "(3,)"]),
    ("load-nan-weight", lambda t: mlp().load_weights(tampered(t, put("layers.2.kernel", lambda a: a * NAN), "model")),
     ModelFileError, ["'kernel'", "non-finite"]),
    ("load-complex-weight", lambda t: mlp().load_weights(tampered(t, put("layers.1.bias",
                                                                         lambda a: a.astype(np.complex64)))),
     ModelFileError, ["'bias'", "complex64"]),
    ("load-extra-array", lambda t: mlp().load_weights(tampered(t, put("layers.9.kernel", np.zeros(2)))),
     ArchitectureMismatchError, ["layers.9.kernel"]),
    ("load-random-bytes", lambda t: mlp().load_weights(write_bytes(t, "r.npz", bytes(range(256)) * 4)),
     ModelFileError, ["not a valid .npz", "zip"]),
    ("load-truncated", lambda t: mlp().load_weights(truncated(t)), ModelFileError, ["not a valid .npz"]),
    ("load-missing-file", lambda t: mlp().load_weights(t / "nope.npz"), FileNotFoundError, ["nope.npz"]),
    ("load-extension", lambda t: mlp().load_weights(t / "weights.h5"), ValueError, [".npz", "weights.h5"]),
    ("load-metadata-list", lambda t: models.load(tampered(t, lambda tensors, meta: meta.update(
        architecture=[{"oops": 1}]))), ModelFileError, ["damaged", "KeyError"]),
    ("load-metadata-layers", lambda t: models.load(tampered(t, meta_set(("model", "layers"), 7))),
     ModelFileError, ["damaged"]),
    ("load-metadata-kind", lambda t: models.load(tampered(t, meta_set(("kind",), "optimizer"))),
     ModelFileError, ["not a model or checkpoint", "'optimizer'"]),
    ("load-random-safetensors", lambda t: models.load(write_bytes(t, "r.safetensors", b"\x10" * 64)),
     ModelFileError, ["r.safetensors"]),
    ("checkpoint-slot-shape", lambda t: mlp("adam").load_checkpoint(tampered(t, put("optimizer.0.m",
                                                                                   np.zeros((2, 2))))),
     ArchitectureMismatchError, ["optimizer slot", "'optimizer.0.m'", "(2, 2)"]),
    ("checkpoint-slot-missing", lambda t: mlp("adam").load_checkpoint(tampered(t, drop("optimizer.1.v"))),
     ArchitectureMismatchError, ["parameter 1", "['m']", "['m', 'v']"]),
    ("checkpoint-slot-unknown", lambda t: mlp("adam").load_checkpoint(tampered(t, put("optimizer.0.velocity",
                                                                                     np.zeros((4, 5))))),
     ArchitectureMismatchError, ["'optimizer.0.velocity'", "Adam"]),
    ("checkpoint-slot-nan", lambda t: mlp("adam").load_checkpoint(tampered(t, put("optimizer.2.v",
                                                                                 lambda a: a + NAN))),
     ModelFileError, ["'optimizer.2.v'", "non-finite"]),
    ("checkpoint-of-model-file", lambda t: mlp().load_checkpoint(  # a model never compiled: no training state
        Sequential([L.Input((4,)), L.Dense(5, activation="relu"), L.Dense(3)]).save(t / "m.npz")),
     ModelFileError, ["without training state", "load_weights"]),
    ("checkpoint-optimizer-class", lambda t: mlp("sgd").load_checkpoint(trained_checkpoint(t)[1]),
     ArchitectureMismatchError, ["Adam", "SGD"]),
    ("checkpoint-epoch", lambda t: mlp("adam").load_checkpoint(tampered(t, meta_set(("epoch",), -2))),
     ModelFileError, ["epoch", "-2"]),
    ("checkpoint-iterations", lambda t: mlp("adam").load_checkpoint(tampered(t, meta_set(("optimizer", "iterations"),
                                                                                        "4"))),
     ModelFileError, ["step count", "'4'"]),
    ("checkpoint-rng", lambda t: mlp("adam").load_checkpoint(tampered(t, meta_set(("rng", "shuffle"), {"x": 1}))),
     ModelFileError, ["shuffling random state"]),
    ("checkpoint-optimizer-entry", lambda t: mlp("adam").load_checkpoint(tampered(t, meta_set(("optimizer",), 5))),
     ModelFileError, ["optimizer"]),
    ("checkpoint-architecture", lambda t: Sequential([L.Input((4,)), L.Dense(6), L.Dense(3)], seed=0).compile(
        "adam").load_checkpoint(trained_checkpoint(t)[1]), ArchitectureMismatchError, ["layer 1", "units"]),
    # -- data
    ("loader-batch-0", lambda t: DataLoader(np.zeros(3), batch_size=0), ValueError, ["batch_size", ">= 1"]),
    ("loader-batch-float", lambda t: DataLoader(np.zeros(3), batch_size=2.5), TypeError, ["batch_size", "2.5"]),
    ("loader-shuffle", lambda t: DataLoader(np.zeros(3), shuffle="no"), TypeError, ["shuffle", "'no'"]),
    ("loader-drop-last", lambda t: DataLoader(np.zeros(3), drop_last=None), TypeError, ["drop_last"]),
    ("loader-mismatch", lambda t: DataLoader(np.zeros(3), np.zeros(2)), ValueError, ["3 samples", "2"]),
    ("loader-scalar", lambda t: DataLoader(np.float32(1)), ValueError, ["scalar"]),
    ("mnist-split-1", lambda t: data.load_mnist(t, test_only_split=1.0), ValueError,
     ["test_only_split", "1.0", "(0, 1)"]),
    ("mnist-split-0", lambda t: data.load_mnist(t, test_only_split=0), ValueError, ["test_only_split", ">= 1"]),
    ("mnist-split-str", lambda t: data.load_mnist(t, test_only_split="0.8"), TypeError, ["test_only_split"]),
    ("mnist-split-all", lambda t: data.load_mnist(mnist_test_only(t), test_only_split=10), DatasetError,
     ["n_train=10", "no sample"]),
    ("mnist-kind", lambda t: data.load_mnist(t, kind="kmnist"), ValueError, ["kind", "kmnist"]),
    ("mnist-missing", lambda t: data.load_mnist(t), DatasetError, ["no mnist IDX files"]),
    ("mnist-float-labels", lambda t: data.load_mnist(mnist_test_only(t, labels_type=0x0D)), DatasetError,
     ["labels must be integers", "float32"]),
    ("cifar-split-1", lambda t: data.load_cifar10(t, test_only_split=1.0), ValueError, ["test_only_split", "1.0"]),
    ("split-fraction", lambda t: data.split_test_set(np.zeros(10), np.zeros(10), n_train=1.5), ValueError,
     ["n_train", "1.5"]),
    ("split-counts", lambda t: data.split_test_set(np.zeros(10), np.zeros(9)), DatasetError, ["10 samples", "9"]),
    ("idx-huge", lambda t: data.parse_idx(idx_bytes(0x08, (2**31, 2**31, 2**31), b"\x00" * 16)), DatasetError,
     ["truncated", "2147483648"]),
    ("idx-magic", lambda t: data.parse_idx(b"\x01\x02\x03\x04"), DatasetError, ["not an IDX file"]),
    ("idx-short-header", lambda t: data.parse_idx(bytes([0, 0, 8, 3, 0, 0])), DatasetError, ["truncated IDX header"]),
    ("idx-trailing", lambda t: data.parse_idx(idx_bytes(0x08, (2,), b"\x00" * 3)), DatasetError, ["trailing bytes"]),
    # -- CLI helpers
    ("cli-plot-folder", lambda t: cli.check_output_path(t, "--plot"), cli.OutputError, ["--plot", "folder"]),
    ("cli-plot-under-file", lambda t: cli.check_output_path(write_bytes(t, "f", b"") / "c.png", "--plot"),
     cli.OutputError, ["not a writable folder"]),
    ("cli-device", lambda t: cli.resolve_device("tpu"), ValueError, ["--device", "'tpu'"]),
    # -- softmax layers over an axis, explicit asymmetric padding
    ("softmax-batch-axis", lambda t: Sequential([L.Input((3,)), L.Softmax(axis=0)]), ShapeMismatchError,
     ["Softmax", "axis 0", "other than the batch axis"]),
    ("log-softmax-axis-range", lambda t: Sequential([L.Input((3,)), L.LogSoftmax(axis=2)]), ShapeMismatchError,
     ["LogSoftmax", "axis 2"]),
    ("softmax-axis-str", lambda t: L.Softmax(axis="1"), TypeError, ["axis", "'1'"]),
    ("conv-padding-pairs", lambda t: L.Conv2D(2, 3, padding=((1, -1), (0, 0))), ValueError, ["padding", ">= 0"]),
    ("pool-padding-triple", lambda t: L.MaxPool2D(2, padding=((1, 0, 1), (0, 0))), ValueError,
     ["padding", "pair"]),
    # -- graph replay
    ("compile-metric-twice", lambda t: mlp().compile("sgd", metrics=["accuracy", metrics.Accuracy(ignore_index=3)]),
     ValueError, ["compile", "repeat a name", "accuracy"]),
    ("compile-graph", lambda t: mlp().compile("sgd", graph="yes"), TypeError, ["compile", "graph", "'yes'"]),
    ("dropout-at-offsets", lambda t: _dropout_at(np.float64), ValueError, ["dropout_at", "offsets", "int64"]),
    ("adam-at-values", lambda t: _adam_at(2), ValueError, ["adam_update_at", "values", "at least 3"]),
    # -- attention
    ("mha-heads-0", lambda t: L.MultiHeadAttention(0, 4), ValueError, ["MultiHeadAttention", "num_heads", ">= 1"]),
    ("mha-key-dim-float", lambda t: L.MultiHeadAttention(2, 2.5), TypeError, ["key_dim", "2.5"]),
    ("mha-dropout-1", lambda t: L.MultiHeadAttention(2, 4, dropout=1.0), ValueError, ["dropout", "1.0"]),
    ("mha-rank", lambda t: L.MultiHeadAttention(2, 4)(L.Input((8,))), ShapeMismatchError,
     ["MultiHeadAttention", "(time, features)", "(8,)"]),
    ("mha-key-value-time", lambda t: L.MultiHeadAttention(2, 4)([L.Input((3, 4)), L.Input((5, 4)), L.Input((6, 4))]),
     ShapeMismatchError, ["key and value", "(5, 4)", "(6, 4)"]),
    ("mha-mask-time", lambda t: L.MultiHeadAttention(2, 4)([L.Input((3, 4)), L.Input((4,))]), ShapeMismatchError,
     ["key mask", "(3,)", "(4,)"]),
    ("masked-softmax-rank", lambda t: functional.masked_softmax(np.zeros((2, 3))), ValueError,
     ["masked_softmax", "4-D", "(2, 3)"]),
    ("masked-softmax-mask", lambda t: functional.masked_softmax(np.zeros((2, 1, 3, 3)), np.ones((2, 4))), ValueError,
     ["key_mask", "(2, 3)", "(2, 4)"]),
    ("position-rank", lambda t: L.PositionEmbedding()(L.Input((4, 2, 2))), ShapeMismatchError,
     ["PositionEmbedding", "(time, features)", "(4, 2, 2)"]),
    ("zoo-char-transformer-images", lambda t: zoo.build("char_transformer", (1, 28, 28), 10), ValueError,
     ["char_transformer", "(context,)", "(1, 28, 28)"]),
    ("attention-shapes", lambda t: functional.scaled_dot_product_attention(
        np.zeros((1, 1, 2, 3)), np.zeros((1, 1, 2, 4)), np.zeros((1, 1, 2, 3))), ValueError,
     ["scaled_dot_product_attention", "(1, 1, 2, 4)"]),
]

# -- recurrent layers
_Z = np.zeros
ROWS += [
    ("lstm-units-0", lambda t: L.LSTM(0), ValueError, ["LSTM", "units", ">= 1", "0"]),
    ("gru-units-float", lambda t: L.GRU(2.5), TypeError, ["GRU", "units", "2.5", "integer"]),
    ("lstm-return-sequences", lambda t: L.LSTM(3, return_sequences="yes"), TypeError,
     ["LSTM", "return_sequences", "'yes'", "True or False"]),
    ("gru-initializer", lambda t: L.GRU(3, recurrent_initializer="orthogonalish"), ValueError,
     ["initializer", "orthogonalish"]),
    ("lstm-rank", lambda t: Sequential([L.Input((8,)), L.LSTM(3)]), ShapeMismatchError,
     ["LSTM", "(time, features)", "(8,)"]),
    ("gru-rank-image", lambda t: Sequential([L.Input((1, 4, 4)), L.GRU(3)]), ShapeMismatchError,
     ["GRU", "(time, features)", "(1, 4, 4)"]),
    ("lstm-x-2d", lambda t: functional.lstm(_Z((2, 4)), _Z((4, 8)), _Z((2, 8)), _Z(8)), ValueError,
     ["lstm", "x", "(batch, time, features)", "(2, 4)"]),
    ("lstm-kernel-rows", lambda t: functional.lstm(_Z((2, 3, 4)), _Z((5, 8)), _Z((2, 8)), _Z(8)), ValueError,
     ["lstm", "kernel", "(5, 8)", "(4, 8)"]),
    ("lstm-kernel-columns", lambda t: functional.lstm(_Z((2, 3, 4)), _Z((4, 6)), _Z((2, 8)), _Z(8)), ValueError,
     ["lstm", "kernel", "4 * units"]),
    ("gru-recurrent-bias", lambda t: functional.gru(_Z((2, 3, 4)), _Z((4, 6)), _Z((2, 6)), _Z(6), _Z(3)),
     ValueError, ["gru", "recurrent_bias", "(3,)", "(6,)"]),
    ("gru-recurrent-kernel", lambda t: functional.gru(_Z((2, 3, 4)), _Z((4, 6)), _Z((3, 6)), _Z(6), _Z(6)),
     ValueError, ["gru", "recurrent_kernel", "(3, 6)", "(2, 6)"]),
    ("lstm-dtypes", lambda t: functional.lstm(_Z((2, 3, 4), np.float32), _Z((4, 8)), _Z((2, 8)), _Z(8)), TypeError,
     ["lstm", "same floating dtype", "float32", "float64"]),
]


# -- normalization, embeddings, token losses, clipping
def token_model(loss="cross_entropy", ids_dtype="int64"):
    x = L.Input((5,), dtype=ids_dtype)
    model = models.Model(x, L.LayerNorm()(L.Embedding(7, 4, name="tokens")(x)), seed=0)  # (N, 5, 4) logits
    return model.compile("adam", loss)


def token_data(n=4, high=7):
    rng = np.random.default_rng(0)
    return rng.integers(0, high, (n, 5)), rng.integers(0, 4, (n, 5))


ROWS += [
    ("layernorm-eps-0", lambda t: L.LayerNorm(eps=0), ValueError, ["LayerNorm", "eps", "0"]),
    ("layernorm-axis-float", lambda t: L.LayerNorm(axis=1.5), TypeError, ["LayerNorm", "axis", "1.5"]),
    ("layernorm-axis-batch", lambda t: Sequential([L.Input((3, 4)), L.LayerNorm(axis=0)]), ShapeMismatchError,
     ["LayerNorm", "axis=0", "non-batch axis"]),
    ("layernorm-axis-beyond", lambda t: Sequential([L.Input((3, 4)), L.LayerNorm(axis=3)]), ShapeMismatchError,
     ["LayerNorm", "axis=3", "[1, 2]"]),
    ("rmsnorm-eps-negative", lambda t: L.RMSNorm(eps=-1e-6), ValueError, ["RMSNorm", "eps"]),
    ("groupnorm-groups-0", lambda t: L.GroupNorm(0), ValueError, ["GroupNorm", "groups", ">= 1"]),
    ("groupnorm-groups-float", lambda t: L.GroupNorm(2.0), TypeError, ["GroupNorm", "groups", "2.0"]),
    ("groupnorm-indivisible", lambda t: Sequential([L.Input((6, 4, 4)), L.GroupNorm(4)]), ShapeMismatchError,
     ["GroupNorm", "divisible by groups=4", "(6, 4, 4)"]),
    ("groupnorm-empty-axis", lambda t: L.GroupNorm(2)(np.zeros((2, 4, 0))), ShapeMismatchError,
     ["GroupNorm", "sizes >= 1", "(4, 0)"]),
    ("layer-norm-gamma-shape", lambda t: functional.layer_norm(np.zeros((2, 4)), np.ones(3)), ValueError,
     ["layer_norm", "gamma", "(4,)"]),
    ("group-norm-groups", lambda t: functional.group_norm(np.zeros((2, 6, 2, 2)), 4), ValueError,
     ["group_norm", "groups", "dividing the 6 channels"]),
    ("embedding-input-dim-0", lambda t: L.Embedding(0, 4), ValueError, ["Embedding", "input_dim", ">= 1"]),
    ("embedding-output-dim-float", lambda t: L.Embedding(5, 2.5), TypeError, ["Embedding", "output_dim", "2.5"]),
    ("embedding-id-out-of-range", lambda t: token_model().fit(*token_data(high=9), verbose=0), ValueError,
     ["Embedding layer 'tokens'", "input_dim=7", "[0, 7)", "got id"]),
    ("embedding-negative-id", lambda t: token_model().predict(-token_data()[0] - 1), ValueError,
     ["Embedding layer 'tokens'", "[0, 7)", "got id -"]),
    ("embedding-float-input", lambda t: token_model(ids_dtype=None).fit(*token_data(), verbose=0), TypeError,
     ["Embedding layer 'tokens'", "integer ids", "dtype='int64'"]),
    ("int-input-float-data", lambda t: token_model().predict(token_data()[0] + 0.5), TypeError,
     ["int64", "dtype float64"]),
    ("embedding-float-ids", lambda t: functional.embedding(np.zeros((3, 2)), np.zeros(4)), TypeError,
     ["embedding", "integers", "float64"]),
    ("embedding-eager-id", lambda t: L.Embedding(3, 2)(np.array([[0, 3]])), ValueError,
     ["Embedding layer", "input_dim=3", "got id 3"]),
    ("xent-smoothing", lambda t: losses.SoftmaxCrossEntropy(label_smoothing=1.5), ValueError,
     ["label_smoothing", "1.5"]),
    ("xent-ignore-float", lambda t: losses.SoftmaxCrossEntropy(ignore_index=0.5), TypeError, ["ignore_index", "0.5"]),
    ("xent-token-labels-shape", lambda t: token_model().fit(token_data()[0], np.zeros((4, 4), np.int64),
                                                            verbose=0), ValueError,
     ["cross_entropy", "(N, 5)", "(4, 4)"]),
    ("xent-token-label-range", lambda t: token_model(losses.SoftmaxCrossEntropy(ignore_index=-100)).fit(
        token_data()[0], np.full((4, 5), 9), verbose=0), ValueError, ["labels must be in [0, 4)", "ignore_index=-100",
                                                                      "found label 9"]),
    ("xent-logits-rank", lambda t: functional.cross_entropy(np.zeros(3), np.zeros(3, np.int64)), ValueError,
     ["cross_entropy", "(N, C) or (N, T, C)"]),
    ("bce-not-from-logits", lambda t: losses.BinaryCrossEntropy(from_logits=False), ValueError,
     ["from_logits=True", "sigmoid"]),
    ("bce-targets-range", lambda t: mlp(loss="binary_cross_entropy").fit(xy()[0], np.full((16, 3), 2.0), verbose=0),
     ValueError, ["binary_cross_entropy", "[0, 1]"]),
    ("bce-targets-shape", lambda t: functional.binary_cross_entropy_with_logits(np.zeros((2, 3)), np.zeros(6)),
     ValueError, ["binary_cross_entropy_with_logits", "(2, 3)"]),
    ("clipnorm-0", lambda t: optimizers.SGD(clipnorm=0), ValueError, ["clipnorm", "(0.0, inf)"]),
    ("global-clipnorm-str", lambda t: optimizers.Adam(global_clipnorm="1"), TypeError, ["global_clipnorm", "'1'"]),
    ("clipnorm-both", lambda t: optimizers.RMSProp(clipnorm=1.0, global_clipnorm=1.0), ValueError,
     ["clipnorm", "global_clipnorm", "only one of"]),
]

def _dropout_at(dtype):
    import pymagma
    from magmadnn.backend.device import kernels
    from pymagma import simulator

    with simulator.simulated("full"):
        x = pymagma.asarray(np.ones(4, np.float32))
        kernels.dropout_at(x, 0.5, seed=1, offsets=pymagma.asarray(np.zeros(2, dtype)), slot=0)


def _adam_at(size):
    import pymagma
    from magmadnn.backend.device import kernels
    from pymagma import simulator

    with simulator.simulated("full"):
        p = pymagma.asarray(np.ones(4, np.float32))
        kernels.adam_update_at(p, p, p, p, values=pymagma.asarray(np.ones(size, np.float64)))


# -- review of the conv/shape and normalisation layers: empty axes, bool ids, targets a loss cannot use
ROWS += [
    ("conv2d-zero-channels", lambda t: L.Conv2D(2, 1)(np.zeros((2, 0, 4, 4))), ShapeMismatchError,
     ["Conv2D", "sizes >= 1", "(0, 4, 4)"]),
    ("depthwise-zero-width", lambda t: L.DepthwiseConv2D(1)(np.zeros((2, 3, 4, 0))), ShapeMismatchError,
     ["DepthwiseConv2D", "sizes >= 1", "(3, 4, 0)"]),
    ("convt-zero-height", lambda t: L.Conv2DTranspose(2, 3)(np.zeros((1, 1, 0, 2))), ShapeMismatchError,
     ["Conv2DTranspose", "sizes >= 1", "(1, 0, 2)"]),
    ("global-max-pool-empty", lambda t: L.GlobalMaxPool2D()(np.zeros((1, 2, 0, 3))), ShapeMismatchError,
     ["GlobalMaxPool2D", "sizes >= 1"]),
    ("layernorm-empty-axis", lambda t: L.LayerNorm()(np.zeros((2, 3, 0))), ShapeMismatchError,
     ["LayerNorm", "axis=-1", "size >= 1"]),
    ("embedding-bool-ids", lambda t: L.Embedding(3, 2)(np.ones((2, 2), bool)), TypeError,
     ["Embedding layer", "integer ids", "dtype bool"]),
    ("xent-onehot-ignore-index", lambda t: mlp(loss=losses.SoftmaxCrossEntropy(ignore_index=0)).fit(
        xy()[0], np.eye(3)[xy()[1]], verbose=0), ValueError, ["ignore_index", "integer targets", "(16, 3)"]),
    ("accuracy-ignore-index-float", lambda t: metrics.Accuracy(ignore_index=0.5), TypeError,
     ["Accuracy", "ignore_index", "0.5"]),
    ("accuracy-outputs-rank", lambda t: metrics.Accuracy().update(np.zeros((2, 3, 4, 5)), np.zeros((2, 3, 4), int),
                                                                  backend_get("host")), ValueError,
     ["accuracy", "(N, T, classes)", "(2, 3, 4, 5)"]),
    ("accuracy-token-labels-shape", lambda t: metrics.Accuracy().update(np.zeros((2, 3, 4)), np.zeros(2, int),
                                                                        backend_get("host")), ValueError,
     ["labels", "(N, T) or one-hot (N, T, C)", "(2,)"]),
    ("xent-soft-token-targets-negative", lambda t: token_model().fit(token_data()[0], -np.ones((4, 5, 4)),
                                                                     verbose=0), ValueError,
     ["cross_entropy", "soft token targets", ">= 0"]),
]


# -- review of attention: what a key mask holds, empty sequences
def masked_attention(mask_value):
    """A self-attention model with a key mask input, fit on a mask holding ``mask_value``."""
    x, mask = L.Input((3, 4)), L.Input((3,))
    model = models.Model([x, mask], L.Flatten()(L.MultiHeadAttention(2, 2, name="mha")([x, mask])))
    model.compile(optimizers.SGD(0.1), loss="mse")
    keys = np.ones((4, 3))
    keys[0, 1] = mask_value
    return model.fit([np.zeros((4, 3, 4)), keys], np.zeros((4, 12)), verbose=0)


ROWS += [
    ("mha-mask-half", lambda t: L.MultiHeadAttention(2, 4)([np.zeros((2, 3, 4)), np.full((2, 3), 0.5)]), ValueError,
     ["MultiHeadAttention layer", "key mask", "1 (attend) or 0 (padding)", "0.5"]),
    ("mha-mask-additive", lambda t: L.MultiHeadAttention(2, 4)([np.zeros((1, 2, 4)), np.array([[0.0, -np.inf]])]),
     ValueError, ["key mask", "-inf", "additive"]),
    ("mha-mask-in-fit", lambda t: masked_attention(2.0), ValueError, ["fit", "MultiHeadAttention layer 'mha'", "2.0"]),
    ("masked-softmax-mask-values", lambda t: functional.masked_softmax(np.zeros((1, 1, 2, 3)), np.full((1, 3), -1.0)),
     ValueError, ["masked_softmax", "key mask", "-1.0"]),
    ("masked-softmax-no-keys", lambda t: functional.masked_softmax(np.zeros((1, 1, 2, 0))), ValueError,
     ["masked_softmax", "at least one query and one key", "(1, 1, 2, 0)"]),
    ("mha-zero-time", lambda t: L.MultiHeadAttention(2, 4)(np.zeros((2, 0, 4))), ShapeMismatchError,
     ["MultiHeadAttention", "at least one query and one key", "(0, 4)"]),
    ("mha-zero-key-time", lambda t: L.MultiHeadAttention(2, 4)([np.zeros((2, 3, 4)), np.zeros((2, 0, 4))]),
     ShapeMismatchError, ["MultiHeadAttention", "at least one query and one key", "(0, 4)"]),
    ("mha-no-inputs", lambda t: L.MultiHeadAttention(2, 4)([]), ShapeMismatchError,
     ["MultiHeadAttention", "[query, key, value]"]),
    ("mha-causal-string", lambda t: L.MultiHeadAttention(2, 4, causal="False"), TypeError,
     ["MultiHeadAttention", "causal", "True or False", "'False'"]),
]

@pytest.mark.parametrize("call, error, words", [pytest.param(*row[1:], id=row[0]) for row in ROWS])
def test_bad_input_gives_a_clear_typed_error(call, error, words, tmp_path):
    with pytest.raises(error) as caught:
        call(tmp_path)
    message = str(caught.value.args[0]) if isinstance(caught.value, KeyError) else str(caught.value)
    missing = [w for w in words if w not in message]
    assert not missing, f"{type(caught.value).__name__}: {message!r} lacks {missing}"


def test_the_matrix_is_large_and_its_ids_unique():
    ids = [row[0] for row in ROWS]
    assert len(ids) == len(set(ids)) and len(ids) >= 150


# ----------------------------------------------------------------------------------------- accepted inputs


def test_numpy_integers_are_accepted_everywhere_a_size_is():
    model = Sequential([L.Input((np.int64(1), np.int32(6), 6)), L.Conv2D(np.int64(2), np.int16(3)),
                        L.MaxPool2D(np.int64(2)), L.Flatten(), L.Dense(np.int64(3))], seed=0)
    model.compile(optimizers.SGD(schedules.CosineDecay(np.float32(0.1), np.int64(10))), metrics=[metrics.TopK(
        np.int64(2))])
    x = np.random.default_rng(0).normal(size=(8, 1, 6, 6)).astype(np.float32)
    y = np.arange(8) % 3
    history = model.fit(x, y, batch_size=np.int64(4), epochs=np.int32(2), initial_epoch=np.int64(1), verbose=0,
                        callbacks=(EarlyStopping("loss", patience=np.int64(3)),))
    assert history.epoch == [1]
    assert model.predict(x, batch_size=np.uint8(3)).shape == (8, 3)
    assert set(model.evaluate(x, y, batch_size=np.int64(5), return_dict=True)) == {"loss", "top2_accuracy"}


def test_predict_on_no_samples_is_an_empty_result():
    assert mlp().predict(np.zeros((0, 4), np.float32)).shape == (0, 3)


# -------------------------------------------------------------------------------------- all-or-nothing loads


def snapshot(model):
    slots = {i: {k: np.array(model.xp.to_numpy(a)) for k, a in s.items()}
             for i, s in model.optimizer.slot_arrays.items()}
    return model.get_weights(), slots, model.optimizer.iterations, model.epoch, model._shuffle_rng.bit_generator.state


def assert_bit_identical(a, b):
    (wa, sa, ia, ea, ra), (wb, sb, ib, eb, rb) = a, b
    assert len(wa) == len(wb) and all(u.tobytes() == v.tobytes() for u, v in zip(wa, wb))
    assert sa.keys() == sb.keys() and all(sa[i][k].tobytes() == sb[i][k].tobytes() for i in sa for k in sa[i])
    assert (ia, ea, ra) == (ib, eb, rb)


FAILED_LOADS = {
    "missing-weight": (drop("layers.2.bias"), ArchitectureMismatchError),
    "last-weight-shape": (put("layers.2.bias", np.zeros(5)), ArchitectureMismatchError),
    "last-weight-nan": (put("layers.2.bias", lambda a: a + NAN), ModelFileError),
    "slot-shape": (put("optimizer.3.v", np.zeros(7)), ArchitectureMismatchError),
    "slot-missing": (drop("optimizer.3.m"), ArchitectureMismatchError),
    "epoch-damaged": (meta_set(("epoch",), "two"), ModelFileError),
    "rng-damaged": (meta_set(("rng", "shuffle"), [1, 2]), ModelFileError),
    "iterations-damaged": (meta_set(("optimizer", "iterations"), -1), ModelFileError),
}


WEIGHT_FAULTS = ("missing-weight", "last-weight-shape", "last-weight-nan")


@pytest.mark.parametrize("loader, how", [("load_checkpoint", how) for how in sorted(FAILED_LOADS)]
                         + [("load_weights", how) for how in WEIGHT_FAULTS])
def test_a_failed_load_leaves_weights_and_optimizer_bit_identical(how, loader, tmp_path):
    edit, error = FAILED_LOADS[how]
    path = tampered(tmp_path, edit)
    model = mlp("adam", seed=5)  # different weights from the file's
    x, y = xy(seed=3)
    model.fit(x, y, batch_size=4, epochs=1, verbose=0)
    before = snapshot(model)
    with pytest.raises(error):
        getattr(model, loader)(path)
    assert_bit_identical(before, snapshot(model))


def test_a_failed_checkpoint_load_leaves_an_uncompiled_model_uncompiled(tmp_path):
    path = tampered(tmp_path, put("optimizer.0.m", np.zeros(3)))
    model = Sequential([L.Input((4,)), L.Dense(5, activation="relu"), L.Dense(3)], seed=1)
    weights = model.get_weights()
    with pytest.raises(ArchitectureMismatchError):
        model.load_checkpoint(path)
    assert not model.compiled and model.optimizer is None
    assert all(u.tobytes() == v.tobytes() for u, v in zip(weights, model.get_weights()))


def test_a_good_checkpoint_still_round_trips(tmp_path):
    trained, path = trained_checkpoint(tmp_path)
    fresh = Sequential([L.Input((4,)), L.Dense(5, activation="relu"), L.Dense(3)], seed=9)
    assert fresh.load_checkpoint(path) == 1
    assert_bit_identical(snapshot(trained), snapshot(fresh))


# ---------------------------------------------------------------------------- ModelCheckpoint(save_best_only)


class Scripted(Callback):
    """Overrides the monitored figure with scripted values (one per epoch) before ModelCheckpoint sees it."""

    def __init__(self, values):
        self.values = list(values)

    def on_epoch_end(self, epoch, logs=None):
        logs["loss"] = self.values.pop(0)


def run_best(path, values, **kwargs):
    x, y = xy()
    model = mlp()
    checkpoint = ModelCheckpoint(path, monitor="loss", save_best_only=True, **kwargs)
    model.fit(x, y, batch_size=8, epochs=len(values), verbose=0, callbacks=[Scripted(values), checkpoint])
    return checkpoint


def test_resumed_save_best_only_never_overwrites_the_best_file_with_a_worse_epoch(tmp_path):
    path = tmp_path / "best.npz"
    first = run_best(path, [0.5, 0.3])
    assert first.best == 0.3 and len(first.saved) == 2
    stored = path.read_bytes()
    second = run_best(path, [0.9, 0.4])  # a new run (a resume) with worse figures
    assert second.saved == [] and second.best == 0.3 and path.read_bytes() == stored
    third = run_best(path, [0.2])
    assert third.saved == [str(path)] and saving.read_file(path)[1]["best"] == {"monitor": "loss", "value": 0.2}


def test_initial_value_threshold_is_a_best_value_to_beat(tmp_path):
    assert run_best(tmp_path / "a.npz", [0.5, 0.4], initial_value_threshold=0.45).saved == [str(tmp_path / "a.npz")]
    assert run_best(tmp_path / "b.npz", [0.5], initial_value_threshold=0.1).saved == []
    assert not (tmp_path / "b.npz").exists()


def test_stored_best_of_another_monitor_is_ignored(tmp_path):
    path = tmp_path / "best.npz"
    run_best(path, [0.1])
    x, y = xy()
    checkpoint = ModelCheckpoint(path, monitor="accuracy", save_best_only=True)
    mlp().fit(x, y, batch_size=8, epochs=1, verbose=0, callbacks=[checkpoint])
    assert checkpoint.saved == [str(path)]


# ------------------------------------------------------------------------------------ non-finite parameters


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_an_overflowing_update_stops_training_naming_the_layer():
    x, y = xy()
    model = mlp(optimizers.SGD(lambda step: 1e38 if step == 0 else 0.1))
    x = x * 100
    with pytest.raises(NonFiniteParameterError, match=r"parameter '(kernel|bias)' of layer '[^']+' \(Dense\)"):
        model.fit(x, y, batch_size=16, epochs=1, verbose=0)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_non_finite_parameters_after_an_earlier_batch_are_reported_not_the_nan_loss():
    x, y = xy(32)
    x = x * 100
    model = mlp(optimizers.SGD(lambda step: 1e38 if step == 0 else 0.1))
    with pytest.raises(NonFiniteParameterError, match="after the update of batch 1"):
        model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_terminate_on_nan_stops_cleanly_on_non_finite_parameters():
    x, y = xy()
    x = x * 100
    model = mlp(optimizers.SGD(lambda step: 1e38 if step == 0 else 0.1))
    history = model.fit(x, y, batch_size=16, epochs=3, verbose=0, callbacks=[TerminateOnNaN()])
    assert model.stop_training and "TerminateOnNaN: parameter" in model.stop_reason
    assert len(history.epoch) == 1


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("interval", [math.inf, 0.0])
def test_on_a_device_non_finite_parameters_ride_on_the_progress_read(gpu, interval):  # noqa: F811
    """The finiteness flag is folded into the tally read: a clean epoch reads the device exactly as often as before
    (once per progress update), and an overflowing update is reported like on the host."""
    x, y = xy(32)
    clean = mlp()
    clean.to("gpu")
    clean.progress_interval = interval
    gpu(0).reads = 0
    clean.fit(x, y, batch_size=8, epochs=1, verbose=0)
    assert gpu(0).reads == (1 if interval == math.inf else 4 + 1)
    errors = []
    for device in ("host", "gpu"):
        model = mlp(optimizers.SGD(lambda step: 1e38 if step == 0 else 0.1))
        model.to(device)
        model.progress_interval = interval
        with pytest.raises(NonFiniteParameterError) as caught:
            model.fit(x * 100, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
        errors.append(re.sub(r"'dense_\d+'", "'dense'", str(caught.value)))
    assert errors[0] == errors[1] and "after the update of batch 1" in errors[0]


def test_schedules_accept_finite_values_and_numpy_numbers():
    schedule = schedules.CosineDecay(initial_lr=np.float64(0.5), decay_steps=np.int64(4), alpha=np.float32(0.5),
                                     warmup_steps=np.int8(1))
    assert schedule(0) == 0.0 and schedule(1) == pytest.approx(0.5) and schedule(100) == pytest.approx(0.25)
    assert math.isclose(schedules.StepDecay(1.0, np.int64(2), gamma=0.5)(5), 0.25)


# ------------------------------------------------------------------------------------------------------- CLI


def test_cli_divergence_is_one_line_and_a_bug_keeps_its_traceback(capsys, monkeypatch):
    def diverge(argv):
        raise models.NonFiniteLossError("fit: the loss became nan")

    assert cli.run_guarded(diverge, []) == 2
    err = capsys.readouterr().err
    assert err == "magmadnn: error: fit: the loss became nan\n"

    def bug(argv):
        raise ValueError("operands could not be broadcast together")

    with pytest.raises(ValueError, match="broadcast"):  # not a user error: the traceback is kept
        cli.run_guarded(bug, [])
    with pytest.raises(models.NonFiniteLossError):
        cli.run_guarded(diverge, ["--debug"])
    monkeypatch.setenv("MAGMADNN_DEBUG", "1")
    with pytest.raises(models.NonFiniteLossError):
        cli.run_guarded(diverge, [])


def test_cli_reports_an_unwritable_plot_path_before_training(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    argv = ["train", "--model", "mlp", "--dataset", "digits", "--epochs", "1", "--max-steps", "1", "--quiet",
            "--plot", str(blocker / "curve.png")]
    pytest.importorskip("sklearn")
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert "--plot" in captured.err and "Traceback" not in captured.err and "test accuracy" not in captured.out


@pytest.mark.parametrize("value", ["0", "-1", "inf", "nan"])
def test_cli_rejects_a_bad_learning_rate(value, capsys):
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["train", "--lr", value])
    assert "--lr" in capsys.readouterr().err


def test_layer_base_class_is_importable_for_custom_layers():
    assert issubclass(L.Dense, Layer)
