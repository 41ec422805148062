"""More of the zoo (models in ``_torch_zoo_more.py``): ViT, MBConv, DenseNet, U-Net, autoencoder, TCN, text CNN,
masked recurrent encoders, nn.Transformer and a causal decoder, paddings, activations, shuffles and pools, bilinear
and weight norm, gather/scatter heads with three outputs, unrolled cells, siamese and mixed-dtype two-input models,
attention by hand, MLP-Mixer, VGG, EmbeddingBag. Each exported with the default ``torch.onnx.export(model, (x,),
path)`` (the dynamo exporter; slow) and ``dynamo=False``, static and dynamic batch; each import predicts like
onnxruntime and PyTorch (a dynamic batch at another batch size), the trainable ones fine-tune a few steps, a few
gradients match PyTorch's autograd."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from .._onnx_helpers import onnx  # noqa: F401 - skips the module without onnx

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

from ._torch_zoo_more import BATCH_AXIS_MORE, ZOO_MORE  # noqa: E402

EXPORT_BATCH, OTHER_BATCH = 2, 3
RTOL, ATOL = 2e-4, 2e-5

#: families PyTorch's legacy exporter (``dynamo=False``) refuses, and the operator it names
LEGACY_EXPORTER_REFUSES = {"bilinear_weight_norm": "aten::bilinear", "shuffle_pools": "aten::channel_shuffle",
                           "vggish": "adaptive_avg_pool2d", "hand_norms": "aten::rms_norm",
                           "lstm_projection": "LSTMs with projections"}
#: exports the import refuses (an UnsupportedOnnxError naming the node's operator): family -> {(default exporter,
#: dynamic batch): the operator named}. nn.EmbeddingBag is a loop over the bags (Loop, sequences); the legacy
#: exporter writes ``squeeze(1)`` of a dynamic size as an If whose branches read the tensor around them; the default
#: exporter writes an LSTM with proj_size as an LSTM node whose initial cell state disagrees with its hidden_size.
REFUSED = {"embedding_bag": {(True, False): "SequenceEmpty", (True, True): "SequenceEmpty", (False, False): "Loop",
                             (False, True): "Loop"},
           "masked_gru": {(False, True): "If"},
           "lstm_projection": {(True, False): "LSTM", (True, True): "LSTM"}}


def _inputs(make, batch):
    x = make(batch)
    return x if isinstance(x, tuple) else (x,)


def build(name):
    """The module (eval mode, seeded: the same weights on every call) and its input maker."""
    torch.manual_seed(0)
    make, inputs, _ = ZOO_MORE[name]
    model = make().eval()
    with torch.no_grad():  # every parameter distinct, running statistics not trivial
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
        for name_, b in model.named_buffers():
            if name_.endswith("running_mean"):
                b.normal_(0, 0.1)
            elif name_.endswith("running_var"):
                b.uniform_(0.5, 1.5)
    return model, inputs


def export(name, dynamo, dynamic, path):
    """The module (eval mode), the input maker and the path of its ONNX export."""
    model, inputs = build(name)
    xs = _inputs(inputs, EXPORT_BATCH)
    kwargs = {"dynamo": dynamo}
    if dynamic:
        axis = BATCH_AXIS_MORE.get(name, 0)
        if dynamo:
            batch = torch.export.Dim("batch", min=1, max=64)
            kwargs["dynamic_shapes"] = tuple({axis: batch} for _ in xs)
        else:
            names = [f"x{i}" for i in range(len(xs))]
            kwargs.update(input_names=names, dynamic_axes={n: {axis: "batch"} for n in names})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, xs, str(path), **kwargs)
    return model, inputs


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The wide zoo's ``exports_once`` for this module's zoo: each (model, exporter, batch) exported once."""
    from .test_load_torch_zoo_wide import exports_once  # noqa: PLC0415

    return exports_once(tmp_path_factory.mktemp("zoo_more"), export, build)


def _as_list(out):
    if isinstance(out, dict):
        return list(out.values())
    return [np.asarray(o) for o in out] if isinstance(out, (list, tuple)) else [np.asarray(out)]


def check_predicts(model, inputs, path, batch):
    from magmadnn import onnx as monnx  # noqa: PLC0415

    torch.manual_seed(1)
    xs = _inputs(inputs, batch)
    session = ort.InferenceSession(str(path))
    want = session.run(None, {i.name: x.numpy() for i, x in zip(session.get_inputs(), xs)})
    with torch.no_grad():
        expected = model(*xs)
    expected = [t.numpy() for t in (expected if isinstance(expected, tuple) else (expected,))]
    loaded = monnx.load(str(path))
    arrays = [x.numpy() for x in xs]
    got = _as_list(loaded.predict(arrays if len(arrays) > 1 else arrays[0]))
    assert len(got) == len(want) == len(expected)
    for g, w, t in zip(got, want, expected):
        assert np.asarray(g).dtype == w.dtype, (np.asarray(g).dtype, w.dtype)
        np.testing.assert_allclose(np.asarray(g), w, rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(np.asarray(g), t, rtol=RTOL, atol=ATOL)
    return loaded


def _cases():
    """Every export of every family the exporter writes and the import reads; the legacy exporter's dynamic batch
    runs in CI, the rest (the default exporter is slow) are marked slow."""
    cases = []
    for name in sorted(ZOO_MORE):
        for dynamo in (True, False):
            if not dynamo and name in LEGACY_EXPORTER_REFUSES:
                continue
            for dynamic in (False, True):
                if (dynamo, dynamic) in REFUSED.get(name, {}):
                    continue
                marks = [] if (not dynamo and dynamic) else [pytest.mark.slow]
                ids = f"{name}-{'default' if dynamo else 'dynamo_false'}-{'dynamic' if dynamic else 'static'}"
                cases.append(pytest.param(name, dynamo, dynamic, marks=marks, id=ids))
    return cases


@pytest.mark.parametrize(("name", "dynamo", "dynamic"), _cases())
def test_zoo_more_predicts_like_onnxruntime_and_torch(name, dynamo, dynamic, exported):
    model, inputs, path = exported(name, dynamo, dynamic)
    check_predicts(model, inputs, path, OTHER_BATCH if dynamic else EXPORT_BATCH)


def _refused_cases():
    return [pytest.param(name, dynamo, dynamic, op, marks=[pytest.mark.slow] if dynamo else [],
                         id=f"{name}-{'default' if dynamo else 'dynamo_false'}-{'dynamic' if dynamic else 'static'}")
            for name, cases in sorted(REFUSED.items()) for (dynamo, dynamic), op in sorted(cases.items())]


@pytest.mark.parametrize(("name", "dynamo", "dynamic", "operator"), _refused_cases())
def test_zoo_more_refusals_are_clear(name, dynamo, dynamic, operator, tmp_path):
    """What the import cannot read is an UnsupportedOnnxError naming the node's operator, at load (never a wrong
    result or another exception at predict)."""
    from magmadnn import onnx as monnx  # noqa: PLC0415

    path = tmp_path / f"{name}.onnx"
    export(name, dynamo, dynamic, path)
    with pytest.raises(monnx.UnsupportedOnnxError, match=rf"\({operator}, opset \d+\)"):
        monnx.load(str(path))


@pytest.mark.parametrize("name", sorted(LEGACY_EXPORTER_REFUSES))
def test_the_legacy_exporter_refuses(name, tmp_path):
    """The families left out of the ``dynamo=False`` exports: PyTorch's legacy exporter has no form for them (a
    PyTorch that gains one fails here, and the family joins the matrix)."""
    with pytest.raises(Exception, match=LEGACY_EXPORTER_REFUSES[name]):  # noqa: PT011 - torch's own error types
        export(name, False, False, tmp_path / f"{name}.onnx")


FINE_TUNE = sorted(name for name, (_, _, trains) in ZOO_MORE.items() if trains and name != "embedding_bag")


#: the families that fine-tune in CI (the legacy exporter, dynamic batch); the rest are marked slow
FINE_TUNE_FAST = {"densenet", "mixed_dtype", "paddings", "siamese", "tcn", "text_cnn", "unrolled_cells", "vit",
                  "activations_more", "autoencoder"}


def _fine_tune_cases():
    legacy = [pytest.param(name, False, True, marks=[] if name in FINE_TUNE_FAST else [pytest.mark.slow],
                           id=f"{name}-dynamo_false-dynamic") for name in FINE_TUNE
              if name not in LEGACY_EXPORTER_REFUSES and (False, True) not in REFUSED.get(name, {})]
    default = [pytest.param(name, True, False, marks=pytest.mark.slow, id=f"{name}-default-static")
               for name in FINE_TUNE]
    return legacy + default


@pytest.mark.parametrize(("name", "dynamo", "dynamic"), _fine_tune_cases())
def test_zoo_more_fine_tunes(name, dynamo, dynamic, exported):
    """A few fit steps lower the loss: a dynamic batch in batches of 4 of 8 samples; a static batch (the default
    export) in batches of the exported size."""
    from .test_load_torch_zoo_wide import assert_fine_tunes  # noqa: PLC0415
    _, inputs, path = exported(name, dynamo, dynamic)
    torch.manual_seed(2)
    xs = [x.numpy() for x in _inputs(inputs, 8 if dynamic else 2 * EXPORT_BATCH)]
    x = xs if len(xs) > 1 else xs[0]
    assert_fine_tunes(path, x, 4 if dynamic else EXPORT_BATCH)


#: PyTorch parameters the export derives (weight_norm's g and v as one product), or that the import keeps constant
#: by the documented rule (a class token Concat'ed, learned positions Add'ed: neither in a weight position)
NOT_MATCHED = {"tcn": {f"convs.{i}.parametrizations.weight.original{j}" for i in range(3) for j in (0, 1)},
               "vit": {"cls", "pos"}}


@pytest.mark.parametrize("name", ["autoencoder", "tcn", "attention_by_hand", "paddings", "vit", "unrolled_cells"])
def test_zoo_more_gradients_match_torch_autograd(name, exported):
    """The gradient of sum(out * u) w.r.t. the input and each weight PyTorch also has, against PyTorch's
    autograd."""
    from magmadnn import onnx as monnx  # noqa: PLC0415

    from .test_load_torch_zoo_wide import assert_gradients_match_torch  # noqa: PLC0415

    model, inputs, path = exported(name, False, False)
    torch.manual_seed(3)
    (x,) = _inputs(inputs, EXPORT_BATCH)
    assert_gradients_match_torch(model, monnx.load(str(path)), x, NOT_MATCHED.get(name, set()))


@pytest.fixture(scope="module")
def simulated():
    from ..backends import model_device  # noqa: PLC0415

    yield from model_device("simulator")


@pytest.mark.native
@pytest.mark.parametrize("name", ["vit", "unrolled_cells", "tcn", "paddings", "text_cnn", "siamese", "signal_1d"])
def test_zoo_more_predicts_on_the_simulated_device(name, simulated, exported):
    from magmadnn import onnx as monnx  # noqa: PLC0415

    model, inputs, path = exported(name, False, True)
    torch.manual_seed(1)
    xs = _inputs(inputs, OTHER_BATCH)
    with torch.no_grad():
        expected = model(*xs)
    arrays = [x.numpy() for x in xs]
    got = monnx.load(str(path), device=simulated).predict(arrays if len(arrays) > 1 else arrays[0])
    np.testing.assert_allclose(np.asarray(got), expected.numpy(), rtol=RTOL, atol=ATOL)
