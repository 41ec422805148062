"""Mixed precision (``magmadnn.mixed_precision``): Keras 3's policy names and layer attributes, float32 weights with
half compute, host vs simulated device, PyTorch CPU autocast as the bf16 reference, digits accuracy, graph == eager,
an attention model, save/load and ONNX export."""

from __future__ import annotations

import os
import warnings

import ml_dtypes
import numpy as np
import pytest

import magmadnn as mdnn
from magmadnn import layers as L
from magmadnn import mixed_precision
from magmadnn.models import Model, Sequential, load_model

from .backends import model_device

BF16 = np.dtype(ml_dtypes.bfloat16)
POLICIES = ("mixed_bfloat16", "mixed_float16")


@pytest.fixture(autouse=True)
def _float32_after():
    yield
    mixed_precision.set_global_policy("float32")


@pytest.fixture(params=["simulator", pytest.param("gpu", marks=pytest.mark.gpu)])
def device(request):
    yield from model_device(request.param)


def _mlp(policy=None, seed=0, hidden=16, inputs=8, classes=4):
    return Sequential([L.Input((inputs,)), L.Dense(hidden, activation="relu"), L.Dense(classes)], seed=seed,
                      dtype=policy)


# ------------------------------------------------------------------------------------------------ the policy API
def test_policy_names_and_dtypes_are_keras_3s():
    from tests.keras_reference import keras

    for name in ("mixed_bfloat16", "mixed_float16", "float32", "float64"):
        ours, theirs = mixed_precision.DTypePolicy(name), keras.mixed_precision.DTypePolicy(name)
        assert (ours.name, ours.compute_dtype, ours.variable_dtype, repr(ours)) == \
            (theirs.name, theirs.compute_dtype, theirs.variable_dtype, repr(theirs))
        assert ours.get_config() == theirs.get_config()
    for alias in ("Policy", "DTypePolicy", "set_global_policy", "global_policy", "set_dtype_policy",
                  "dtype_policy"):
        assert hasattr(keras.mixed_precision, alias) and hasattr(mixed_precision, alias)
    with pytest.raises(ValueError, match="mixed_bfloat16"):
        mixed_precision.set_global_policy("bfloat16")  # Keras takes a pure half policy; magmadnn says no
    with pytest.raises(ValueError, match="policy name"):
        mixed_precision.set_global_policy(3)
    for half in (np.float16, BF16):  # a layer's weights are float32 or float64
        with pytest.raises(ValueError, match="mixed_float16"):
            L.Dense(2, dtype=half)
    for foreign in (keras.mixed_precision.DTypePolicy("mixed_float16"), object()):  # not one of ours: named
        with pytest.raises(TypeError, match=r"layer 'd': dtype must be a policy name .* got "):
            L.Dense(2, dtype=foreign, name="d")


@pytest.mark.parametrize("name", ["float", "double", "single", "f4", "<f8"])
def test_only_canonical_dtype_names_are_policies_as_in_keras(name):
    from tests.keras_reference import keras

    for make in (lambda api, layers: api.DTypePolicy(name), lambda api, layers: layers.Dense(2, dtype=name),
                 lambda api, layers: api.set_global_policy(name)):
        with pytest.raises(ValueError, match="Cannot convert"):
            make(keras.mixed_precision, keras.layers)
        with pytest.raises(ValueError, match="'mixed_bfloat16', 'mixed_float16', 'float32' and 'float64'"):
            make(mixed_precision, L)
    assert mixed_precision.global_policy().name == "float32"


def test_a_model_has_keras_compute_and_variable_dtypes():
    from tests.keras_reference import keras

    rows = []
    for lib, api, make in ((keras, keras.mixed_precision, lambda: keras.Input((4,))), (mdnn, mixed_precision,
                                                                                       lambda: L.Input((4,)))):
        try:
            for policy in ("mixed_float16", "mixed_bfloat16", "float64"):
                api.set_global_policy(policy)
                model = lib.Sequential([make(), lib.layers.Dense(3)])
                rows.append((lib is mdnn, policy, model.dtype_policy.name, model.compute_dtype, model.variable_dtype))
        finally:
            api.set_global_policy("float32")
    assert [row[1:] for row in rows[:3]] == [row[1:] for row in rows[3:]]


def test_layers_take_the_global_policy_when_made_as_keras_layers_do():
    from tests.keras_reference import keras

    try:
        rows = []
        for lib, api in ((keras, keras.mixed_precision), (mdnn, mixed_precision)):
            before = lib.layers.Dense(3)
            api.set_global_policy("mixed_bfloat16")
            during, own = lib.layers.Dense(3), lib.layers.Dense(3, dtype="float32")
            per_layer = lib.layers.Dense(3, dtype=api.DTypePolicy("mixed_float16"))
            policy = api.global_policy()
            api.set_global_policy("float32")
            rows.append([policy.name, policy.compute_dtype] +
                        [(layer.dtype_policy.name, layer.compute_dtype, layer.variable_dtype, str(layer.dtype))
                         for layer in (before, during, own, per_layer)])
        assert rows[0] == rows[1]
    finally:
        keras.mixed_precision.set_global_policy("float32")


# ------------------------------------------------------------------------- float32 weights, half computation
@pytest.mark.parametrize("policy", POLICIES)
def test_weights_and_gradients_are_float32_and_a_layer_outputs_half(policy):
    half = mixed_precision.numpy_dtype(mixed_precision.DTypePolicy(policy).compute_dtype)
    model = _mlp(policy)
    dense = model.layers[0]
    x = np.random.default_rng(0).standard_normal((5, 8)).astype(np.float32)
    y = dense(x)
    assert y.dtype == half
    kernel, bias = dense.kernel.numpy(), dense.bias.numpy()
    # the reference: operands rounded to the half type, float32 sums, one rounding, then the bias the same way
    product = (x.astype(half).astype(np.float32) @ kernel.astype(half).astype(np.float32)).astype(half)
    want = np.maximum((product.astype(np.float32) + bias.astype(half).astype(np.float32)).astype(half), 0)
    np.testing.assert_array_equal(y.numpy().astype(np.float32), want.astype(np.float32))
    out = model(x)
    assert out.dtype == np.float32  # what losses, metrics and predict read
    mdnn.F.sum(out).backward()
    assert all(p.data.dtype == np.float32 and p.grad.dtype == np.float32 for p in model.parameters())


def test_a_plain_layer_takes_a_mixed_layers_half_output_as_keras_layers_do():
    """Keras' advice under a mixed policy, a float32 last layer: each layer casts its float inputs to its own compute
    dtype (the half output of a mixed layer, float32 into a float64 layer), as Keras' layers do."""
    from tests.keras_reference import keras

    x = np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)
    rows = []
    for lib, api in ((keras, keras.mixed_precision), (mdnn, mixed_precision)):
        api.set_global_policy("mixed_float16")
        try:
            stack = [lib.layers.Dense(5, activation="relu"), lib.layers.Dense(3, dtype="float32"),
                     lib.layers.Activation("softmax", dtype="float32"), lib.layers.Dense(2, dtype="float64"),
                     lib.layers.Dense(2, dtype="mixed_bfloat16")]
        finally:
            api.set_global_policy("float32")
        h, row = x, []
        for layer in stack:
            h = layer(h)
            row.append(str(h.dtype).removeprefix("torch."))
        rows.append(row)
    assert rows[0] == rows[1] == ["float16", "float32", "float32", "float64", "bfloat16"]


def test_symbolic_tensors_have_keras_dtypes_under_a_policy():
    """Keras' mixed precision guide reads ``x.dtype`` of the functional graph's tensors."""
    from tests.keras_reference import keras

    rows = []
    for lib, api in ((keras, keras.mixed_precision), (mdnn, mixed_precision)):
        api.set_global_policy("mixed_float16")
        try:
            pixels, tokens = lib.layers.Input((6,)), lib.layers.Input((3,), dtype="int64")
            hidden = lib.layers.Dense(8, activation="relu")(pixels)
            embedded = lib.layers.Embedding(5, 8)(tokens)
            normed = lib.layers.LayerNormalization()(hidden)
            out = lib.layers.Activation("softmax", dtype="float32")(lib.layers.Dense(3)(normed))
            tensors = [getattr(t, "output", t) for t in (pixels, tokens)] + [hidden, embedded, normed, out]
            if lib is mdnn:  # the model made (it configures its layers) changes none of them
                assert isinstance(tensors[0], mdnn.layers.SymbolicTensor)
                Model([pixels, tokens], out)
            rows.append([str(t.dtype) for t in tensors])
        finally:
            api.set_global_policy("float32")
    assert rows[0] == rows[1] == ["float32", "int64", "float16", "float16", "float16", "float32"]


@pytest.mark.parametrize("where", ["host", "simulator"])
def test_a_mixed_model_with_a_float32_head_trains(where):
    for device in model_device(where):
        mixed_precision.set_global_policy("mixed_float16")
        model = Sequential([L.Input((8,)), L.Dense(16, activation="relu"), L.Dense(4, dtype="float32"),
                            L.Activation("softmax", dtype="float32")], seed=0)
        mixed_precision.set_global_policy("float32")
        model.compile(mdnn.optimizers.Adam(0.05), "sparse_categorical_crossentropy", device=device)
        rng = np.random.default_rng(2)
        x, y = rng.standard_normal((32, 8)).astype(np.float32), rng.integers(0, 4, 32)
        losses = [model.train_on_batch(x, y) for _ in range(5)]
        assert np.isfinite(losses).all() and losses[-1] < losses[0]
        assert model.layers[0](x).dtype == np.float16 and model.layers[1].compute_dtype == "float32"


def test_normalisation_computes_in_float32_and_outputs_half():
    mixed_precision.set_global_policy("mixed_bfloat16")
    norm = L.LayerNormalization()
    x = np.array([[1000.0, 1001.0, 1002.0, 1003.0]], np.float32)  # bfloat16 rounds these to 1000, 1000, 1000, 1004
    y = norm(x)
    assert y.dtype == BF16
    z = (x - x.mean()) / np.sqrt(x.var() + norm.eps)
    np.testing.assert_array_equal(y.numpy().astype(np.float32), z.astype(BF16).astype(np.float32))
    assert norm.gamma.data.dtype == np.float32


# ---------------------------------------------------------------------------------- host vs simulated device
@pytest.mark.parametrize("policy", POLICIES)
def test_host_and_device_train_alike_under_each_policy(device, policy):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((32, 1, 6, 6)).astype(np.float32)
    y = rng.integers(0, 4, 32)
    losses = []
    for where in ("host", device):
        model = Sequential([L.Input((1, 6, 6)), L.Conv2D(4, 3, activation="relu"), L.MaxPool2D(2), L.Flatten(),
                            L.Dense(4, activation="softmax")], seed=5, dtype=policy)
        model.compile(mdnn.optimizers.Adam(0.01), "sparse_categorical_crossentropy", device=where)
        losses.append([model.train_on_batch(x[i:i + 8], y[i:i + 8]) for i in range(0, 32, 8)])
        assert all(p.data.dtype == np.float32 for p in model.parameters())
    # the first step's loss is equal; then the device's cuDNN/cuBLAS sums in another order before their one rounding
    # move a few half-precision weights' updates by an ulp: under 1e-3 relative measured, bounded by one bf16 ulp
    np.testing.assert_allclose(losses[1], losses[0], rtol=2.0**-8)


# ------------------------------------------------------------------------------- PyTorch autocast as reference
def test_bf16_loss_matches_pytorch_cpu_autocast_from_identical_weights():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(11)
    x = rng.standard_normal((64, 20)).astype(np.float32)
    y = rng.integers(0, 5, 64)
    model = _mlp("mixed_bfloat16", seed=2, hidden=32, inputs=20, classes=5)
    model.compile("sgd", mdnn.losses.SparseCategoricalCrossentropy(from_logits=True))
    ours = model.evaluate(x, y, verbose=0)
    (k1, b1), (k2, b2) = [(torch.tensor(d.kernel.numpy()), torch.tensor(d.bias.numpy())) for d in model.layers]

    def loss(autocast):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            h = torch.relu(torch.nn.functional.linear(torch.tensor(x), k1.T, b1))
            logits = torch.nn.functional.linear(h, k2.T, b2)
            return float(torch.nn.functional.cross_entropy(logits.float(), torch.tensor(y)))

    bf16, f32 = loss(True), loss(False)
    # both round operands to bf16, sum in float32 and round each layer's output to bf16; torch rounds x@W+b once,
    # magmadnn x@W and then +b (one more rounding, at most 2**-9 relative, on a few logits, which the mean over 64
    # samples averages: 6e-8 relative measured). bf16 against float32 differs by 1.6e-4 relative here, so 2e-5 tells
    # autocast's arithmetic from float32's (the second assertion keeps that true)
    assert abs(ours - bf16) <= 2e-5 * abs(bf16)
    assert abs(bf16 - f32) > 5 * 2e-5 * abs(bf16)


# --------------------------------------------------------------------------------------------------- digits
@pytest.fixture(scope="module")
def digits():
    datasets = pytest.importorskip("sklearn.datasets")
    data = datasets.load_digits()
    x, y = (data.data / 16.0).astype(np.float32), data.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(x))
    x, y = x[order], y[order]
    return (x[:1200], y[:1200]), (x[1200:], y[1200:])


def _digits_accuracy(digits, policy, device):
    (xt, yt), (xv, yv) = digits
    model = _mlp(policy, seed=1, hidden=32, inputs=64, classes=10)
    model.compile(mdnn.optimizers.Adam(0.02), mdnn.losses.SparseCategoricalCrossentropy(from_logits=True),
                  ["accuracy"], device=device)
    model.fit(xt, yt, batch_size=200, epochs=3, verbose=0)
    return model.evaluate(xv, yv, verbose=0, batch_size=597)[1]


@pytest.mark.parametrize("where", ["host", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_digits_accuracy_under_each_mixed_policy_is_within_003_of_float32s(where, digits):
    """On the host and on a GPU (on the simulated device, which trains as the host does (see the test above), it
    takes ~10 s: measured by hand for docs/training.md, with the same accuracies)."""
    device = where
    reference = _digits_accuracy(digits, "float32", device)
    assert reference > 0.85
    for policy in POLICIES:
        assert abs(_digits_accuracy(digits, policy, device) - reference) <= 0.03, policy


# ---------------------------------------------------------------------------------------------- graph replay
@pytest.mark.parametrize("policy", POLICIES)
def test_graph_replay_equals_eager_bit_for_bit_under_a_policy(device, policy):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((40, 8)).astype(np.float32)
    y = rng.integers(0, 4, 40)
    runs = []
    for graph in (False, True):
        model = Sequential([L.Input((8,)), L.Dense(16, activation="relu"), L.Dropout(0.25), L.Dense(4)], seed=9,
                           dtype=policy)
        model.compile(mdnn.optimizers.Adam(0.01), mdnn.losses.SparseCategoricalCrossentropy(from_logits=True),
                      ["accuracy"], device=device, graph=graph)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a step that cannot be captured warns
            history = model.fit(x, y, batch_size=8, epochs=2, verbose=0)
        runs.append((history.history, [p.numpy() for p in model.parameters()]))
    assert runs[0][0] == runs[1][0]
    for eager, replayed in zip(runs[0][1], runs[1][1]):
        np.testing.assert_array_equal(eager, replayed)


# ---------------------------------------------------------------------------------------------- attention
def test_an_attention_model_trains_under_mixed_bfloat16(device):
    mixed_precision.set_global_policy("mixed_bfloat16")
    tokens = L.Input((6,), dtype="int64")
    h = L.Embedding(12, 8)(tokens)
    h = L.LayerNormalization()(L.Add()([h, L.MultiHeadAttention(num_heads=2, key_dim=4)([h, h])]))
    out = L.Dense(12)(L.GlobalAveragePooling1D()(h))
    model = Model(tokens, out, seed=3)
    assert model.dtype_policy.name == "mixed_bfloat16"
    rng = np.random.default_rng(5)
    x = rng.integers(0, 12, (32, 6))
    y = x[:, 0]  # the first token: attention must carry it to the pooled output
    model.compile(mdnn.optimizers.Adam(0.05), mdnn.losses.SparseCategoricalCrossentropy(from_logits=True),
                  device=device)
    losses = [model.train_on_batch(x, y) for _ in range(4)]
    assert np.isfinite(losses).all() and losses[-1] < 0.8 * losses[0]
    assert all(p.data.dtype == np.float32 for p in model.parameters())


# ------------------------------------------------------------------------------------- save, load, ONNX
def test_the_policy_is_saved_with_the_model_and_onnx_gets_float32(tmp_path):
    mixed_precision.set_global_policy("mixed_bfloat16")
    model = Sequential([L.Input((6,)), L.Dense(8, activation="relu"), L.LayerNormalization(),
                        L.Dense(3, activation="softmax")], seed=0)
    mixed_precision.set_global_policy("float32")
    model.compile("adam", "sparse_categorical_crossentropy")
    x = np.random.default_rng(0).standard_normal((5, 6)).astype(np.float32)
    model.fit(x, np.arange(5) % 3, epochs=1, verbose=0)
    model.save(tmp_path / "m.safetensors")
    loaded = load_model(tmp_path / "m.safetensors")
    assert loaded.dtype_policy.name == "mixed_bfloat16"
    assert [layer.dtype_policy.name for layer in loaded.layers] == ["mixed_bfloat16"] * 3
    assert all(p.data.dtype == np.float32 for p in loaded.parameters())
    predicted = model.predict(x, verbose=0)
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), predicted)
    ort = pytest.importorskip("onnxruntime")
    onnx = pytest.importorskip("onnx")
    from magmadnn.onnx import export

    path = export(model, os.fspath(tmp_path / "m.onnx"))
    assert {t.data_type for t in onnx.load(path).graph.initializer} == {onnx.TensorProto.FLOAT}
    session = ort.InferenceSession(path)
    got = session.run(None, {session.get_inputs()[0].name: x})[0]
    np.testing.assert_allclose(got, predicted, atol=2e-2)  # float32 compute against bf16 compute


# -------------------------------------------------------------------------- other layer kinds (host, quick)
class _KerasStyleDense(L.Layer):
    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units = units

    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1], self.units))

    def call(self, x):
        assert x.dtype == BF16 and self.w.dtype == BF16  # the weight kept as an attribute is cast too
        return mdnn.F.matmul(x, self.w)


def _tokens_model(middle):
    tokens = L.Input((5,), dtype="int64")
    h = middle(L.Embedding(10, 8, mask_zero=True)(tokens))
    return Model(tokens, L.Dense(3)(h), seed=0)


@pytest.mark.parametrize("kind", ["bidirectional_gru", "masked_attention", "keras_style", "batch_norm_cnn"])
def test_other_layer_kinds_train_under_mixed_bfloat16(kind):
    mixed_precision.set_global_policy("mixed_bfloat16")
    rng = np.random.default_rng(0)
    tokens = rng.integers(1, 10, (16, 5))
    tokens[:, -1] = 0
    x, model = {
        "bidirectional_gru": lambda: (tokens, _tokens_model(L.Bidirectional(L.GRU(6)))),
        "masked_attention": lambda: (tokens, _tokens_model(
            lambda h: L.GlobalAveragePooling1D()(L.MultiHeadAttention(2, 4)([h, h])))),
        "keras_style": lambda: (rng.standard_normal((16, 4)).astype(np.float32),
                                Sequential([L.Input((4,)), _KerasStyleDense(3)], seed=0)),
        "batch_norm_cnn": lambda: (rng.standard_normal((16, 2, 6, 6)).astype(np.float32), Sequential(
            [L.Input((2, 6, 6)), L.Conv2D(4, 3), L.BatchNormalization(), L.Activation("relu"),
             L.GlobalAveragePooling2D(), L.Dense(3)], seed=0)),
    }[kind]()
    model.compile(mdnn.optimizers.Adam(0.05), mdnn.losses.SparseCategoricalCrossentropy(from_logits=True))
    y = np.arange(16) % 3
    losses = [model.train_on_batch(x, y) for _ in range(5)]
    assert np.isfinite(losses).all() and losses[-1] < losses[0]
    assert all(p.data.dtype == np.float32 for p in model.parameters())


# ---------------------------------------------------------------------------------- compile's loss scaling (Keras)
def test_compile_wraps_the_optimizer_in_loss_scaling_under_mixed_float16_as_keras():
    from magmadnn import optimizers as O
    from tests.keras_reference import keras

    for policy, wrapped in (("mixed_float16", True), ("mixed_bfloat16", False), ("float32", False)):
        ours = _mlp(policy).compile("sgd", "cross_entropy")
        keras.mixed_precision.set_global_policy(policy)
        try:
            theirs = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)])
            theirs.compile("sgd", "mse")
        finally:
            keras.mixed_precision.set_global_policy("float32")
        assert isinstance(theirs.optimizer, keras.optimizers.LossScaleOptimizer) == wrapped
        assert isinstance(ours.optimizer, O.LossScaleOptimizer) == wrapped, policy
    assert not isinstance(_mlp("mixed_float16").compile("sgd", auto_scale_loss=False).optimizer, O.LossScaleOptimizer)
    kept = O.LossScaleOptimizer(O.SGD(0.1), initial_scale=8.0)
    assert _mlp("mixed_float16").compile(kept).optimizer is kept


@pytest.mark.parametrize("where", ["host", "simulator", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_an_overflowing_float16_step_is_skipped_with_the_scale_lowered(where):
    for device in model_device(where):
        model = _mlp("mixed_float16").compile("sgd", "cross_entropy", device=device)
        rng = np.random.default_rng(0)
        x, y = rng.standard_normal((8, 8)).astype(np.float32), rng.integers(0, 4, 8)
        model.train_on_batch(x, y)
        before = [np.array(w) for w in model.get_weights()]
        assert all(w.dtype == np.float32 for w in before)
        with np.errstate(all="ignore"):
            model.train_on_batch(x * np.float32(1e5), y)  # past float16's 65504: the half activations overflow
        assert model.optimizer.dynamic_scale == 2.0**14
        for a, b in zip(before, model.get_weights()):
            np.testing.assert_array_equal(a, b)
        model.train_on_batch(x, y)
        assert not np.array_equal(before[0], model.get_weights()[0])


# ------------------------------------------------------------- loading under another policy (round three)
def _saved(tmp_path, policy=None, layer_policy=None):
    if policy is not None:
        mixed_precision.set_global_policy(policy)
    model = Sequential([L.Input((8,)), L.Dense(16, activation="relu", name="hidden"),
                        L.Dense(4, name="head", dtype=layer_policy)], seed=0)
    model.compile("sgd", "cross_entropy")
    path = model.save(tmp_path / "m.npz")
    mixed_precision.set_global_policy("float32")
    return model, path


def _policies(model):
    return [layer.dtype_policy.name for layer in model.layers]


LOAD_CASES = [  # (id, saved under, a layer's own policy, global at load, how, expected layer policies)
    ("float32-under-mixed-float16", None, None, "mixed_float16", "load_model", ["float32", "float32"]),
    ("float32-under-mixed-bfloat16", None, None, "mixed_bfloat16", "load_model", ["float32", "float32"]),
    ("float32-under-float64", None, None, "float64", "load_model", ["float32", "float32"]),
    ("mixed-under-float32", "mixed_float16", None, "float32", "load_model", ["mixed_float16", "mixed_float16"]),
    ("mixed-under-other-mixed", "mixed_bfloat16", None, "mixed_float16", "load_model",
     ["mixed_bfloat16", "mixed_bfloat16"]),
    ("own-layer-policy-under-mixed", None, "mixed_bfloat16", "mixed_float16", "load_model",
     ["float32", "mixed_bfloat16"]),
    ("json-under-mixed", None, None, "mixed_float16", "model_from_json", ["float32", "float32"]),
    ("clone-under-mixed", None, None, "mixed_bfloat16", "clone_model", ["float32", "float32"]),
    ("config-under-mixed", None, None, "mixed_float16", "model_from_config", ["float32", "float32"]),
]


@pytest.mark.parametrize("saved_under, own, at_load, how, expected",
                         [pytest.param(*c[1:], id=c[0]) for c in LOAD_CASES])
def test_a_model_rebuilt_under_another_global_policy_keeps_its_saved_policies(tmp_path, saved_under, own, at_load,
                                                                               how, expected):
    """Fault list, mixed precision and loading under another policy (Keras 3 keeps the policy each layer was saved
    with; checked against Keras' model_from_json below):
      float32 model loaded under mixed_float16 / mixed_bfloat16   float32 (was: computed in half, no loss scaling)
      float32 model loaded under float64                          float32 weights and compute
      mixed_float16 model loaded under float32                    mixed_float16, its LossScaleOptimizer restored
      mixed_bfloat16 model loaded under mixed_float16             mixed_bfloat16
      a layer's own mixed_bfloat16 in a float32 model, loaded under mixed_float16   that layer mixed_bfloat16 only
      model_from_json / model_from_config / clone_model under a mixed policy       the saved float32
      the global policy after a load (and after a failed load)    unchanged
      set_global_policy("float16" / "mixed_float32" / "" / None), DTypePolicy(3)   ValueError / TypeError naming
                                                                  the policies magmadnn has (test below)
    """
    from magmadnn import models

    original, path = _saved(tmp_path, saved_under, own)
    mixed_precision.set_global_policy(at_load)
    if how == "load_model":
        loaded = load_model(path)
    elif how == "model_from_json":
        loaded = models.model_from_json(original.to_json())
    elif how == "model_from_config":
        loaded = models.model_from_config(original.get_config())
    else:
        loaded = models.clone_model(original)
    assert mixed_precision.global_policy().name == at_load
    assert _policies(loaded) == expected == _policies(original)
    if how == "load_model":
        x = np.random.default_rng(0).standard_normal((5, 8)).astype(np.float32)
        np.testing.assert_array_equal(loaded.predict(x), original.predict(x))
        assert type(loaded.optimizer) is type(original.optimizer)


def test_keras_keeps_the_saved_policy_when_the_global_one_differs():
    from tests.keras_reference import keras

    try:
        model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)])
        keras.mixed_precision.set_global_policy("mixed_float16")
        loaded = keras.models.model_from_json(model.to_json())
        assert [layer.dtype_policy.name for layer in loaded.layers] == ["float32"]
    finally:
        keras.mixed_precision.set_global_policy("float32")


def test_a_failed_load_leaves_the_global_policy(tmp_path):
    from magmadnn import models

    config = _saved(tmp_path)[0].get_config()
    config["layers"][-1]["class_name"] = "NoSuchLayer"  # fails while the layers are made
    mixed_precision.set_global_policy("mixed_float16")
    with pytest.raises(ValueError, match="NoSuchLayer"):
        models.model_from_config(config)
    assert mixed_precision.global_policy().name == "mixed_float16"


@pytest.mark.parametrize("policy, error, words", [
    ("float16", ValueError, ["'float16'", "'mixed_float16'"]),
    ("mixed_float32", ValueError, ["'mixed_float32'", "'mixed_bfloat16'"]),
    ("", ValueError, ["''", "policies"]),
    (None, ValueError, ["policy name", "None"]),
    (np.float16, ValueError, ["policy name", "float16"]),
])
def test_bad_global_policies_name_the_policies(policy, error, words):
    with pytest.raises(error) as caught:
        mixed_precision.set_global_policy(policy)
    assert all(w in str(caught.value) for w in words), caught.value
    assert mixed_precision.global_policy().name == "float32"


_FIRST_SIGHT = """
import sys
import numpy as np
import magmadnn as mdnn
from magmadnn import functional as F
from magmadnn.backend import host
assert "ml_dtypes" not in sys.modules  # magmadnn learns bfloat16 on first sight, never importing ml_dtypes itself
import ml_dtypes
bf16 = np.dtype(ml_dtypes.bfloat16)
rng = np.random.default_rng(0)
a, b = (rng.standard_normal((8, 64)).astype(bf16), rng.standard_normal((64, 8)).astype(bf16))
want = (a.astype(np.float32) @ b.astype(np.float32)).astype(bf16)  # float32 accumulate, one rounding
got = host.matmul(a, b)
assert got.dtype == bf16 and np.array_equal(got.view(np.uint16), want.view(np.uint16))
out = F.matmul(mdnn.Tensor(a), mdnn.Tensor(b))  # the functional dtype check takes bfloat16 on first sight too
assert out.dtype == bf16 and np.array_equal(np.asarray(out.numpy()).view(np.uint16), want.view(np.uint16))
print("ok")
"""


def test_bfloat16_operands_are_recognised_on_first_sight_in_a_fresh_process():
    """``import magmadnn`` does not load ml_dtypes (half a second per process); a bfloat16 array made afterwards is
    still a half operand of the host ops (float32 compute, rounded once) and a floating input of functional."""
    import subprocess
    import sys
    from pathlib import Path

    done = subprocess.run([sys.executable, "-c", _FIRST_SIGHT], cwd=Path(__file__).parents[2], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
