"""The ONNX commands of ``python -m magmadnn``: ``export`` (a magmadnn model file -> ONNX), ``import`` (ONNX -> a
magmadnn model file) and ``info`` (what an ONNX file holds and whether it imports)."""

from __future__ import annotations

__all__ = ["add_parsers", "run"]

COMMANDS = ("export", "import", "info")


def add_parsers(commands) -> None:
    """Add the ONNX sub-commands to the CLI's sub-parser collection ``commands``."""
    export = commands.add_parser("export", help="write a magmadnn model file (.safetensors/.npz) as ONNX")
    export.add_argument("model", help="a model file or checkpoint written by model.save / save_checkpoint")
    export.add_argument("output", help="the ONNX file to write (e.g. model.onnx)")
    export.add_argument("--opset", type=int, default=None, help="ONNX opset (default: 17, or what a layer needs)")
    imp = commands.add_parser("import", help="read an ONNX file and save it as a magmadnn model file")
    imp.add_argument("onnx", help="the ONNX file (e.g. from torch.onnx.export)")
    imp.add_argument("output", help="the magmadnn model file to write (.safetensors or .npz)")
    imp.add_argument("--summary", action="store_true", help="print the imported model's layer table")
    info = commands.add_parser("info", help="describe an ONNX file and say whether magmadnn imports it")
    info.add_argument("onnx", help="the ONNX file")


def run(args) -> None:
    from ..models import load_model  # noqa: PLC0415
    from . import export, info, load  # noqa: PLC0415

    if args.command == "export":
        model = load_model(args.model, device="host")
        print(f"wrote {export(model, args.output, opset=args.opset)} ({len(model.layers)} layers)")
    elif args.command == "import":
        model = load(args.onnx, device="host")
        if args.summary:
            model.summary()
        print(f"wrote {model.save(args.output)} ({len(model.layers)} layers, {model.count_params():,} parameters)")
    else:
        print(info(args.onnx))
