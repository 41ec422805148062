"""Command line: ``magmadnn train --model lenet5 --dataset mnist --data DIR ...`` (also ``python -m magmadnn``).

The helpers here (argument set, dataset choice, device choice, throughput timing, report and training-curve plot)
are shared by the scripts in ``examples/`` so that each example only shows the model and the training calls.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

from . import backend, data, distributed, mixed_precision, zoo
from ._atomic import atomic_write
from .callbacks import Callback
from .models import NonFiniteLossError, NonFiniteParameterError
from .onnx import OnnxExportError
from .onnx import commands as onnx_commands
from .saving import ArchitectureMismatchError, ModelFileError

DATASETS = ("auto", "digits", "mnist", "fashion", "cifar10", "cifar100")
DEVICES = ("auto", "host", "cpu", "gpu", "gpu:N")
DEFAULT_EPOCHS = {"digits": 10, "mnist": 3, "fashion": 3, "cifar10": 10, "cifar100": 10}


# ------------------------------------------------------------------------------------------------ arguments


def add_training_arguments(parser: argparse.ArgumentParser, *, epochs: int | None = 3, batch_size: int = 32,
                           lr: float = 1e-3, optimizer: str = "adam") -> argparse.ArgumentParser:
    """The options every training command shares (data folder, epochs, batch size, device, ...)."""
    parser.add_argument("--data", metavar="DIR", default=None,
                        help="folder with the dataset files (default: the cache, $MAGMADNN_DATA or ~/.cache/magmadnn)")
    parser.add_argument("--download", action="store_true", help="fetch missing files from the public mirrors")
    parser.add_argument("--epochs", type=positive_int, default=epochs,
                        help=f"passes over the data (default {epochs or 'by dataset: ' + _epoch_defaults()})")
    parser.add_argument("--batch-size", type=positive_int, default=batch_size,
                        help=f"samples per step (default {batch_size})")
    parser.add_argument("--lr", type=positive_float, default=lr, help=f"learning rate (default {lr})")
    parser.add_argument("--optimizer", choices=("adam", "sgd"), default=optimizer,
                        help=f"adam, or sgd with Nesterov momentum 0.9 (default {optimizer})")
    parser.add_argument("--schedule", choices=("cosine", "constant"), default="cosine",
                        help="learning rate: cosine decay to 0 over the run, or constant (default cosine)")
    parser.add_argument("--device", type=device_name, default="auto", metavar="{host,gpu,gpu:N,auto}",
                        help="host (NumPy), gpu (the current GPU), gpu:N (GPU number N), or auto: the GPU when "
                             "pymagma finds one or its simulator is on (PYMAGMA_SIMULATOR=1), else host (default auto)")
    parser.add_argument("--validation-split", type=fraction, default=0.1, metavar="F",
                        help="validate each epoch on the last fraction F of the training samples, as Keras' "
                             "validation_split (0: no validation; the test set is only for the final report; "
                             "default 0.1)")
    parser.add_argument("--seed", type=int, default=0, help="seed of weights, shuffling and dropout (default 0)")
    parser.add_argument("--max-steps", type=positive_int, default=None, metavar="N",
                        help="smoke run: train on at most N batches per epoch and test on as many samples")
    parser.add_argument("--plot", metavar="PNG", default=None,
                        help="write the training curve here (needs matplotlib)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--debug", action="store_true",
                        help="show the full traceback of every error (also MAGMADNN_DEBUG=1)")
    return parser


def _epoch_defaults() -> str:
    return ", ".join(f"{name} {count}" for name, count in DEFAULT_EPOCHS.items())


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text}")
    return value


def fraction(text: str) -> float:
    value = float(text)
    if not (0.0 <= value < 1.0):
        raise argparse.ArgumentTypeError(f"expected a fraction in [0, 1), got {text}")
    return value


def bucket_mb(text: str) -> float | None:
    """``--bucket-mb`` values: a size in MiB (> 0), or ``fused`` (None: one buffer for all the gradients)."""
    if text.strip().lower() in ("fused", "none"):
        return None
    try:
        return positive_float(text)
    except (argparse.ArgumentTypeError, ValueError):
        raise argparse.ArgumentTypeError(f"expected a size in MiB (> 0) or fused, got {text}") from None


#: the image files ``--plot`` writes (formats matplotlib's Agg backend saves)
PLOT_SUFFIXES = (".png", ".pdf", ".svg", ".jpg", ".jpeg")


class OutputError(OSError):
    """An output file (``--plot``) that cannot be written; the message says which and why."""


def check_output_path(path, option: str) -> Path:
    """``path`` can be written: not a folder, and its nearest existing parent is a writable folder (checked before
    training so that a bad path costs no training time); OutputError otherwise."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"{option} {str(path)!r} is a folder; give a file name such as curve.png")
    if option == "--plot" and path.suffix.lower() not in PLOT_SUFFIXES:
        raise OutputError(f"{option} {str(path)!r} must name an image ending in {', '.join(PLOT_SUFFIXES)} (such as "
                          "curve.png)")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{option} {str(path)!r} cannot be written: {str(parent)!r} is not a writable folder")
    return path


def example_parser(description: str | None, **defaults) -> argparse.ArgumentParser:
    """An argument parser for one example script, with the shared training options."""
    parser = argparse.ArgumentParser(description=(description or "").strip().splitlines()[0] if description else None)
    return add_training_arguments(parser, **defaults)


# ---------------------------------------------------------------------------------------------- data, device


def device_name(text: str) -> str:
    """``--device`` values: host, cpu, gpu, gpu:N or auto (checked for spelling only; see ``resolve_device``)."""
    try:
        if text.strip().lower() != "auto":
            backend.resolve_device(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected one of host, gpu, gpu:N (N a GPU number) or auto, "
                                         f"got {text!r}") from None
    return text


def resolve_device(name: str = "auto") -> str:
    """The device for ``--device``: "host", "gpu" or "gpu:N" ("auto": the GPU when usable, else "host"); a GPU
    name that cannot run here raises ``backend.DeviceUnavailableError`` saying what was checked."""
    try:
        device = backend.resolve_device(name)
    except ValueError:
        raise ValueError(f"--device must be one of host, gpu, gpu:N (N a GPU number) or auto, got {name!r}") from None
    backend.get(device)  # a clear error when the GPU backend is not usable here
    return device


def pick_dataset(name: str, path: str | None) -> str:
    """Resolve ``--dataset auto``: MNIST when a folder is given or the cache holds it, else the embedded digits."""
    if name != "auto":
        return name
    if path is not None or data.has_mnist(data.mnist_dir("mnist")):
        return "mnist"
    return "digits"


def load_dataset(name: str, path: str | None = None, download: bool = False):
    """``((x_train, y_train), (x_test, y_test)), num_classes`` of a dataset named as on the command line."""
    name = pick_dataset(name, path)
    if name == "digits":
        return data.load_digits(), 10
    if name in ("mnist", "fashion"):
        return data.load_mnist(path, kind=name, download=download), 10
    if name == "cifar10":
        return data.load_cifar10(path, download=download), 10
    if name == "cifar100":
        return data.load_cifar100(path, download=download), 100
    raise ValueError(f"unknown dataset {name!r}; expected one of {DATASETS}")


def limit_for_smoke_run(split, max_steps: int | None, batch_size: int):
    """Keep at most ``max_steps * batch_size`` training and test samples (no limit when `max_steps` is None)."""
    if max_steps is None:
        return split
    keep = max_steps * batch_size
    (x_train, y_train), (x_test, y_test) = split
    return (x_train[:keep], y_train[:keep]), (x_test[:keep], y_test[:keep])


def make_optimizer(name: str, lr: float, schedule: str = "constant", total_steps: int | None = None):
    """Adam, or SGD with Nesterov momentum 0.9; ``schedule="cosine"`` decays `lr` to 0 over `total_steps` updates."""
    from . import optimizers, schedules

    if schedule == "cosine":
        lr = schedules.CosineDecay(lr, max(int(total_steps or 1), 1))
    if name == "sgd":
        return optimizers.SGD(lr, momentum=0.9, nesterov=True)
    return optimizers.Adam(lr)


# ------------------------------------------------------------------------------------------ timing, report


class Throughput(Callback):
    """Times the training batches of each epoch (validation excluded) to report samples per second."""

    def __init__(self, samples_per_epoch: int):
        self.samples_per_epoch = samples_per_epoch
        self.seconds: list[float] = []

    def on_epoch_begin(self, epoch, logs=None):
        self._start, self._last = time.perf_counter(), None

    def on_test_begin(self, logs=None):  # validation starts: the training batches are done (no batch hook needed)
        self._last = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.seconds.append((self._last or time.perf_counter()) - self._start)

    @property
    def samples_per_second(self) -> float:
        total = sum(self.seconds)
        return self.samples_per_epoch * len(self.seconds) / total if total > 0 else float("nan")


def describe_data(name: str, split) -> str:
    (x_train, _), (x_test, _) = split
    return f"{name}: {len(x_train)} train / {len(x_test)} test samples of shape {tuple(x_train.shape[1:])}"


def save_curve(history, path: str | Path, title: str | None = None) -> Path | None:
    """Plot loss and accuracy per epoch (train and validation) to a PNG; None when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    logs = history.history
    epochs = np.arange(1, len(logs.get("loss", [])) + 1)
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for ax, key in zip(axes, ("loss", "accuracy")):
        for prefix, style in (("", "-o"), ("val_", "--s")):
            if prefix + key in logs:
                ax.plot(epochs, logs[prefix + key], style, label=("validation " if prefix else "train ") + key)
        ax.set_xlabel("epoch")
        ax.set_title(key)
        ax.grid(alpha=0.3)
        ax.legend()
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(path) as handle:  # a failed write keeps the file that was there
            fig.savefig(handle, dpi=100, format=path.suffix[1:].lower() or "png")
    except OSError as exc:
        raise OutputError(f"cannot write the training curve to {str(path)!r}: {exc.strerror or exc}") from None
    except ValueError as exc:  # matplotlib: an image format it does not write
        raise OutputError(f"cannot write the training curve to {str(path)!r}: {exc} (use a .png name)") from None
    finally:
        plt.close(fig)
    return path


def fit_and_report(model, split, args, name: str) -> dict:
    """Compile with the chosen optimizer, fit with per-epoch validation on the last ``--validation-split`` of the
    training split (never on the test split), evaluate on the test split, and print the test accuracy, the
    training throughput and (with ``--plot``) where the training curve went."""
    (x_train, y_train), (x_test, y_test) = split
    if args.plot:
        check_output_path(args.plot, "--plot")
    device = resolve_device(args.device)
    validation_split = getattr(args, "validation_split", 0.0)
    n_train = math.floor(len(x_train) * (1.0 - validation_split)) if validation_split else len(x_train)
    steps = args.epochs * -(-n_train // args.batch_size)
    optimizer = make_optimizer(args.optimizer, args.lr, args.schedule, steps)
    model.compile(optimizer=optimizer, loss="cross_entropy", metrics=["accuracy"],
                  seed=args.seed, device=device)
    print(describe_data(name, split))
    why = " (auto: no usable GPU here)" if args.device == "auto" and device == "host" else ""
    policy = "" if model.dtype_policy.name == "float32" else f" ({model.dtype_policy.name})"
    print(f"model {model.name}{policy} on {model.device}{why}, {args.optimizer} lr={args.lr} ({args.schedule}), "
          f"batch {args.batch_size}, {args.epochs} epoch(s)")
    if validation_split:
        print(f"validation: the last {len(x_train) - n_train} of the {len(x_train)} training samples")
    timer = Throughput(n_train)
    history = model.fit(x_train, y_train, batch_size=args.batch_size, epochs=args.epochs,
                        validation_split=validation_split, callbacks=[timer], verbose=0 if args.quiet else 1)
    results = model.evaluate(x_test, y_test, batch_size=max(args.batch_size, 256), return_dict=True)
    accuracy = float(results["accuracy"])
    print(f"test accuracy {accuracy:.4f} ({accuracy * 100:.2f}%), test loss {float(results['loss']):.4f}")
    print(f"throughput {timer.samples_per_second:,.0f} samples/s in training, {sum(timer.seconds):.1f} s total")
    report = {"test_accuracy": accuracy, "test_loss": float(results["loss"]),
              "samples_per_second": timer.samples_per_second, "train_seconds": sum(timer.seconds),
              "history": history}
    if args.plot:
        where = save_curve(history, args.plot, f"{model.name} on {name} ({model.device})")
        print(f"training curve: {where}" if where else "training curve skipped: matplotlib is not installed")
    return report


# ------------------------------------------------------------------------------------------------- commands


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="magmadnn", description="magmadnn: deep learning on the host or a GPU")
    commands = parser.add_subparsers(dest="command", required=True)
    train = commands.add_parser("train", help="train a zoo model on a dataset and report test accuracy")
    train.add_argument("--model", choices=sorted(set(zoo.BUILDERS) - set(zoo.TOKEN_MODELS)), default="cnn",
                       help="network (default cnn; char_transformer: examples/char_transformer.py)")
    train.add_argument("--dataset", choices=DATASETS, default="auto",
                       help="dataset (default auto: MNIST when --data is given or cached, else the embedded digits)")
    add_training_arguments(train, epochs=None, lr=2e-3)
    train.add_argument("--dtype-policy", choices=("float32", "mixed_bfloat16", "mixed_float16"), default="float32",
                       help="Keras' mixed precision policy of the model: weights in float32, layers computing in "
                            "bfloat16 or float16 (mixed_float16 with dynamic loss scaling; default float32)")
    onnx_commands.add_parsers(commands)  # ONNX: export, import, info
    return parser


def train_command(args) -> dict:
    name = pick_dataset(args.dataset, args.data)
    args.epochs = args.epochs or DEFAULT_EPOCHS[name]
    split, num_classes = load_dataset(name, args.data, args.download)
    split = limit_for_smoke_run(split, args.max_steps, args.batch_size)
    previous = mixed_precision.global_policy()
    mixed_precision.set_global_policy(getattr(args, "dtype_policy", "float32"))
    try:  # the layers take the policy when they are made
        model = zoo.build(args.model, split[0][0].shape[1:], num_classes)
    finally:
        mixed_precision.set_global_policy(previous)
    if not args.quiet:
        model.summary()
    return fit_and_report(model, split, args, name)


#: The errors a user can act on: bad data, a missing optional package, no usable device, a diverging run, a
#: damaged or foreign model file, a path mistake, a file that cannot be read or written (OSError: permissions, a full
#: disk). Anything else is a bug and keeps its traceback.
USER_ERRORS = (data.DatasetError, ImportError, backend.DeviceUnavailableError, NonFiniteLossError,
               NonFiniteParameterError, ModelFileError, ArchitectureMismatchError, OutputError, OnnxExportError,
               onnx_commands.CommandError, OSError)


def debugging(argv=None) -> bool:
    """``--debug`` on the command line or ``MAGMADNN_DEBUG=1``: every error shows its full traceback."""
    args = sys.argv[1:] if argv is None else list(argv)
    return "--debug" in args or os.environ.get("MAGMADNN_DEBUG", "").strip().lower() in ("1", "true", "yes")


def run_guarded(entry, argv=None, prog: str = "magmadnn") -> int:
    """Run ``entry(argv)``; one of the ``USER_ERRORS`` prints one line on stderr and gives exit status 2 instead of
    a traceback (unless debugging, see ``debugging``); any other exception propagates with its traceback. Under
    ``mpiexec`` with several ranks such an error ends every rank (it may have happened on this one only)."""
    try:
        entry(argv)
    except USER_ERRORS as exc:
        if debugging(argv):
            raise
        print(f"{prog}: error: {exc}", file=sys.stderr)
        distributed.abort_if_several_ranks(2)
        return 2
    return 0


def _dispatch(argv) -> None:
    args = build_parser().parse_args(argv)
    if args.command == "train":
        train_command(args)
    elif args.command in onnx_commands.COMMANDS:
        onnx_commands.run(args)


def main(argv=None) -> int:
    return run_guarded(_dispatch, argv)
