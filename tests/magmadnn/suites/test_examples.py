"""Smoke runs of every example and of the command line on tiny dataset files generated here (a few steps each)."""

from __future__ import annotations

import importlib.util
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from magmadnn import cli
from tests.magmadnn.dataset_files import write_cifar10_folder, write_cifar100_folder, write_mnist_folder

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"
SMOKE = ["--epochs", "1", "--batch-size", "8", "--max-steps", "2", "--device", "host", "--quiet"]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """Tiny MNIST (24 train / 16 test), CIFAR-10 (5x4 train / 8 test) and CIFAR-100 folders."""
    root = tmp_path_factory.mktemp("datasets")
    paths = {name: root / name for name in ("mnist", "cifar10", "cifar100", "empty")}
    for path in paths.values():
        path.mkdir()
    write_mnist_folder(paths["mnist"], n_train=24, n_test=16)
    write_cifar10_folder(paths["cifar10"], per_batch=4, n_test=8)
    write_cifar100_folder(paths["cifar100"], n_train=16, n_test=8)
    return paths


def load_example(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_report(report, n_epochs=1):
    assert 0.0 <= report["test_accuracy"] <= 1.0
    assert math.isfinite(report["test_loss"]) and report["samples_per_second"] > 0
    losses = report["history"].history["loss"]
    assert len(losses) == n_epochs and all(math.isfinite(v) for v in losses)


@pytest.mark.parametrize(
    "example, dataset",
    [("mnist_mlp", "mnist"), ("lenet5", "mnist"), ("cnn_2d", "mnist"), ("cifar10_cnn", "cifar10"),
     ("resnet_cifar10", "cifar10")],
)
def test_every_example_trains_a_few_steps(example, dataset, folders, capsys):
    report = load_example(example).main(["--data", str(folders[dataset]), *SMOKE])
    check_report(report)
    out = capsys.readouterr().out
    assert "test accuracy" in out and "samples/s" in out
    assert "16 test samples" in out or "8 test samples" in out  # --max-steps 2 x batch 8 caps the test split


# -- MagmaDNN's VGG-16 and AlexNet examples, at a sixteenth of their width
@pytest.mark.parametrize("example", ["vgg_cifar10", "alexnet_cifar10"])
def test_magmadnn_cnn_examples_train_a_few_steps(example, folders, capsys):
    report = load_example(example).main(["--data", str(folders["cifar10"]), *SMOKE, "--width", "0.0625"])
    check_report(report)
    assert "test accuracy" in capsys.readouterr().out


# Examples smoke-tested elsewhere, with the test module that runs them.
TESTED_ELSEWHERE = {"distributed_mnist": "test_distributed.py", "grid_search": "test_tuning.py"}


def test_every_example_file_is_smoke_tested():
    tested = {"mnist_mlp", "lenet5", "cnn_2d", "cifar10_cnn", "resnet_cifar10"}
    tested |= {"vgg_cifar10", "alexnet_cifar10"}
    tested |= {"char_transformer"}

    tested |= {"lstm_mnist_rows"}
    tested |= {"gan", "vae"}  # test_the_gan_and_the_vae_train_a_few_steps
    assert {p.stem for p in EXAMPLES.glob("*.py")} == tested | set(TESTED_ELSEWHERE)
    for example, module in TESTED_ELSEWHERE.items():
        assert f'"{example}.py"' in (Path(__file__).parents[1] / module).read_text()


@pytest.mark.parametrize(
    "model, dataset",
    [("lenet5", "mnist"), ("mlp", "fashion"), ("cnn", "cifar100"), ("resnet", "cifar10"), ("cnn", "digits")],
)
def test_cli_train_each_model(model, dataset, folders, capsys):
    folder = {"fashion": "mnist"}.get(dataset, dataset)
    data_args = [] if dataset == "digits" else ["--data", str(folders[folder])]
    if dataset == "digits":
        pytest.importorskip("sklearn")
    assert cli.main(["train", "--model", model, "--dataset", dataset, *data_args, *SMOKE]) == 0
    out = capsys.readouterr().out
    assert f"model {model}" in out.replace("small_cnn", "cnn").replace("resnet_small", "resnet")
    assert "test accuracy" in out


def test_cli_trains_under_a_mixed_precision_policy(folders, monkeypatch, capsys):
    """``--dtype-policy``: the model's layers compute in bfloat16 with float32 weights; the global policy is left
    as it was."""
    from magmadnn import mixed_precision

    built = []
    monkeypatch.setattr(cli.zoo, "build", lambda *a, build=cli.zoo.build: built.append(build(*a)) or built[-1])
    assert cli.main(["train", "--model", "mlp", "--dataset", "mnist", "--data", str(folders["mnist"]), *SMOKE,
                     "--dtype-policy", "mixed_bfloat16"]) == 0
    assert "model mlp (mixed_bfloat16)" in capsys.readouterr().out
    dense = [layer for layer in built[0].layers if layer.params][0]
    assert (dense.compute_dtype, dense.variable_dtype) == ("bfloat16", "float32")
    assert mixed_precision.global_policy().name == "float32"


def test_python_dash_m_entry_point_writes_the_curve(folders, tmp_path):
    png = tmp_path / "curve.png"
    env = {**os.environ, "MAGMADNN_DATA": str(folders["empty"])}
    proc = subprocess.run(
        [sys.executable, "-m", "magmadnn", "train", "--model", "mlp", "--dataset", "mnist",
         "--data", str(folders["mnist"]), *SMOKE, "--plot", str(png)],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "test accuracy" in proc.stdout
    if importlib.util.find_spec("matplotlib") is not None:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    else:
        assert "matplotlib is not installed" in proc.stdout


def test_cli_reports_a_bad_folder_in_one_line(folders, capsys):
    assert cli.main(["train", "--dataset", "mnist", "--data", str(folders["empty"]), *SMOKE]) == 2
    err = capsys.readouterr().err
    assert err.startswith("magmadnn: error: ") and "no mnist IDX files found" in err and "Traceback" not in err


def test_cli_rejects_unknown_choices(capsys):
    with pytest.raises(SystemExit):
        cli.main(["train", "--model", "vgg19"])
    assert "invalid choice: 'vgg19'" in capsys.readouterr().err


def test_auto_dataset_prefers_given_or_cached_mnist(folders, tmp_path, monkeypatch):
    monkeypatch.setenv("MAGMADNN_DATA", str(tmp_path))
    assert cli.pick_dataset("auto", None) == "digits"
    assert cli.pick_dataset("auto", str(folders["mnist"])) == "mnist"
    (tmp_path / "mnist").mkdir()
    write_mnist_folder(tmp_path / "mnist", 0, 4, with_train=False)
    assert cli.pick_dataset("auto", None) == "mnist"
    assert cli.pick_dataset("cifar10", None) == "cifar10"


def test_auto_device_falls_back_to_host_without_a_gpu_backend():
    from magmadnn import backend

    expected = "gpu" if backend.probe().usable else "host"
    assert cli.resolve_device("auto") == expected
    assert cli.resolve_device("host") == "host"
    with pytest.raises(ValueError, match="--device must be one of"):
        cli.resolve_device("tpu")


def test_smoke_limit_keeps_the_first_samples():
    x, y = np.arange(100), np.arange(100) % 10
    (xa, ya), (xb, yb) = cli.limit_for_smoke_run(((x, y), (x[:50], y[:50])), max_steps=3, batch_size=4)
    np.testing.assert_array_equal(xa, x[:12])
    np.testing.assert_array_equal(xb, x[:12])
    assert cli.limit_for_smoke_run(((x, y), (x, y)), None, 4)[0][0] is x


def test_cnn_learns_the_embedded_digits(capsys):
    """A real (short) training run: the demo's CNN must beat chance (10%) by a wide margin on held-out digits."""
    pytest.importorskip("sklearn")
    report = load_example_cli(["--model", "cnn", "--dataset", "digits", "--epochs", "2", "--batch-size", "32",
                               "--device", "host", "--quiet"])
    assert report["test_accuracy"] > 0.6


def load_example_cli(argv):
    args = cli.build_parser().parse_args(["train", *argv])
    return cli.train_command(args)


def test_dataloader_feeds_model_fit_and_evaluate():
    """The batches of magmadnn.data.DataLoader train a zoo model like in-memory arrays do."""
    from magmadnn import data, zoo

    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 48)
    x = rng.standard_normal((48, 1, 4, 4)).astype(np.float32) * 0.1
    x[np.arange(48), 0, y, y] += 2.0  # the class marks one pixel: learnable
    model = zoo.mlp(input_shape=(1, 4, 4), num_classes=3, hidden=(16,))
    model.compile(optimizer=cli.make_optimizer("adam", 0.05), loss="cross_entropy", metrics=["accuracy"], seed=0)
    history = model.fit(data.DataLoader(x, y, batch_size=8, seed=0), epochs=5, verbose=0)
    assert len(history.history["loss"]) == 5 and history.history["loss"][-1] < history.history["loss"][0]
    assert model.evaluate(data.DataLoader(x, y, batch_size=16, shuffle=False), return_dict=True)["accuracy"] > 0.9


# ------------------------------------------------------------------------------------------ attention
def test_char_transformer_trains_reports_the_baselines_and_samples(tmp_path, capsys):
    text = tmp_path / "tiny.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 12, encoding="utf-8")
    report = load_example("char_transformer").main(
        ["--data", str(text), "--context", "8", "--dim", "8", "--heads", "2", "--blocks", "1", "--sample-chars", "5",
         *SMOKE])
    out = capsys.readouterr().out
    assert "bigram" in out and "unigram" in out and "--- sample" in out
    assert math.isfinite(report["val_loss"]) and 0 < report["bigram"] < report["unigram"]
    assert len(report["sample"]) == 5 and set(report["sample"]) <= set(text.read_text())
    assert len(report["history"].history["loss"]) == 1

# -- recurrent
def test_lstm_mnist_rows_example_trains_a_few_steps(folders, capsys):
    report = load_example("lstm_mnist_rows").main(["--data", str(folders["mnist"]), "--units", "8", *SMOKE])
    check_report(report)
    out = capsys.readouterr().out
    assert "lstm_classifier" in out and "of shape (28, 28)" in out and "test accuracy" in out


def test_cli_validates_on_the_training_split_never_on_the_test_set(folders, capsys, monkeypatch):
    """fit gets the training samples only, holding out their last --validation-split as Keras' validation_split;
    the test samples reach evaluate alone."""
    from magmadnn.models import Model

    seen = {}
    original_fit, original_evaluate = Model.fit, Model.evaluate

    def fit(self, x=None, y=None, **kwargs):
        seen["fit"] = (len(x), kwargs.get("validation_split"), kwargs.get("validation_data"))
        return original_fit(self, x, y, **kwargs)

    def evaluate(self, x, y=None, **kwargs):
        seen["evaluate"] = len(x)
        return original_evaluate(self, x, y, **kwargs)

    monkeypatch.setattr(Model, "fit", fit)
    monkeypatch.setattr(Model, "evaluate", evaluate)
    args = ["--model", "mlp", "--dataset", "mnist", "--data", str(folders["mnist"]), "--epochs", "1",
            "--batch-size", "4", "--device", "host", "--quiet"]
    report = load_example_cli(args)
    assert seen == {"fit": (24, 0.1, None), "evaluate": 16}
    assert "validation: the last 3 of the 24 training samples" in capsys.readouterr().out
    assert {"val_loss", "val_accuracy"} <= set(report["history"].history)
    report = load_example_cli([*args, "--validation-split", "0"])
    assert seen["fit"] == (24, 0.0, None) and "val_loss" not in report["history"].history
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["train", "--validation-split", "1"])


def test_the_gan_and_the_vae_train_a_few_steps(folders, tmp_path):
    gan = load_example("gan").main(["--data", str(folders["mnist"]), *SMOKE])
    history = gan["history"].history
    assert sorted(history) == ["d_loss", "g_loss"] and all(math.isfinite(v[0]) for v in history.values())
    vae = load_example("vae").main(["--data", str(folders["mnist"]), *SMOKE])
    assert math.isfinite(vae["history"].history["loss"][0]) and math.isfinite(vae["test_loss"])
    model = vae["vae"]
    assert len(model.losses) == 1  # the KL term of the last call
    loaded = __import__("magmadnn").load_model(model.save(str(tmp_path / "vae.npz")))
    sample = np.zeros((3, model.pixels), np.float32)
    np.testing.assert_array_equal(loaded.predict(sample), model.predict(sample))
