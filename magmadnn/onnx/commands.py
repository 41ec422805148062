"""The ONNX commands of ``python -m magmadnn``: ``export`` (a magmadnn model file -> ONNX), ``import`` (ONNX -> a
magmadnn model file) and ``info`` (what an ONNX file holds and whether it imports)."""

from __future__ import annotations

import argparse
import contextlib
import os

__all__ = ["add_parsers", "run", "CommandError", "check_paths"]

COMMANDS = ("export", "import", "info")
MODEL_SUFFIXES = (".safetensors", ".npz")
ONNX_SUFFIXES = (".onnx",)


class CommandError(ValueError):
    """A command-line mistake (a missing input, an output that is the input, a wrong suffix, swapped arguments, a
    missing output folder); the CLI prints its one-line message and exits with status 2."""


def _suffix(path: str) -> str:
    return os.path.splitext(path)[1].lower()


def check_paths(command: str, source: str, output: str) -> None:
    """Refuse, before anything is read or written, the path mistakes of ``export``/``import``: an input that does
    not exist, an output with the wrong suffix or the arguments swapped, an output that is the input (it would be
    overwritten), an output whose folder does not exist or that is a folder."""
    wanted_in, wanted_out = (MODEL_SUFFIXES, ONNX_SUFFIXES) if command == "export" else (ONNX_SUFFIXES, MODEL_SUFFIXES)
    usage = ("magmadnn export MODEL.safetensors|MODEL.npz OUT.onnx" if command == "export"
             else "magmadnn import MODEL.onnx OUT.safetensors|OUT.npz")
    if _suffix(output) not in wanted_out:
        swapped = _suffix(source) in wanted_out and _suffix(output) in wanted_in
        what = ("the arguments look swapped (input first, then the file to write)" if swapped
                else f"the output {output!r} must end in {' or '.join(wanted_out)}")
        hint = "; to write ONNX use magmadnn export" if command == "import" and _suffix(output) == ".onnx" else ""
        raise CommandError(f"{command}: {what}; usage: {usage}{hint}")
    if command == "export" and _suffix(source) not in wanted_in:
        raise CommandError(f"{command}: the model to export {source!r} must be a magmadnn model file or checkpoint "
                           f"ending in {' or '.join(wanted_in)}; usage: {usage}"
                           + ("; to read an ONNX file use magmadnn import" if _suffix(source) == ".onnx" else ""))
    if not os.path.isfile(source):
        kind = "a folder, not a file" if os.path.isdir(source) else "missing"
        raise CommandError(f"{command}: the input {source!r} is {kind}; usage: {usage}")
    if os.path.exists(output) and os.path.samefile(source, output):
        raise CommandError(f"{command}: the output {output!r} is the input file, which writing it would destroy; "
                           "give another output name")
    if os.path.isdir(output):
        raise CommandError(f"{command}: the output {output!r} is a folder; give a file name such as "
                           f"{os.path.join(output, 'model' + wanted_out[0])!r}")
    folder = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(folder):
        raise CommandError(f"{command}: the folder of the output {output!r} ({folder!r}) does not exist; create it "
                           "first")


def add_parsers(commands) -> None:
    """Add the ONNX sub-commands to the CLI's sub-parser collection ``commands``."""
    export = commands.add_parser("export", help="write a magmadnn model file (.safetensors/.npz) as ONNX")
    export.add_argument("model", help="a model file or checkpoint written by model.save / save_checkpoint")
    export.add_argument("output", help="the ONNX file to write (e.g. model.onnx)")
    export.add_argument("--opset", type=_opset, default=None, help="ONNX opset (default: 17, or what a layer needs)")
    imp = commands.add_parser("import", help="read an ONNX file and save it as a magmadnn model file")
    imp.add_argument("onnx", help="the ONNX file (e.g. from torch.onnx.export)")
    imp.add_argument("output", help="the magmadnn model file to write (.safetensors or .npz)")
    imp.add_argument("--summary", action="store_true", help="print the imported model's layer table")
    info = commands.add_parser("info", help="describe an ONNX file and say whether magmadnn imports it")
    info.add_argument("onnx", help="the ONNX file")


def _opset(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an ONNX opset version (an integer such as 17), got {text!r}") \
            from None


@contextlib.contextmanager
def _writing(args):
    """A failed write (disk full, file-size limit, no permission) as one CommandError line: the write is atomic, so
    the file that was there is unchanged."""
    try:
        yield
    except OSError as exc:
        raise CommandError(f"{args.command}: cannot write {args.output!r}: {exc.strerror or exc}; nothing was "
                           "written (a file that was there is unchanged)") from None


def run(args) -> None:
    from ..models import load_model  # noqa: PLC0415
    from . import export, info, load  # noqa: PLC0415

    if args.command in ("export", "import"):
        check_paths(args.command, getattr(args, "model", None) or args.onnx, args.output)
    if args.command == "export":
        model = load_model(args.model, device="host")
        with _writing(args):
            written = export(model, args.output, opset=args.opset)
        print(f"wrote {written} ({len(model.layers)} layers)")
    elif args.command == "import":
        model = load(args.onnx, device="host")
        if args.summary:
            model.summary()
        with _writing(args):
            written = model.save(args.output)
        print(f"wrote {written} ({len(model.layers)} layers, {model.count_params():,} parameters)")
    else:
        print(info(args.onnx))
