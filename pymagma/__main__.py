"""``python -m pymagma [--json]``: print the environment report of :func:`pymagma.info`."""

from __future__ import annotations

import argparse
import json

from .info import info


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pymagma", description=main.__doc__)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    report = info()
    print(json.dumps(report, indent=2, default=str) if args.json else str(report))
    return 0


main.__doc__ = "Report MAGMA, CUDA, cuBLAS, cuDNN and NVRTC: paths, versions, devices, and what is missing."

if __name__ == "__main__":
    raise SystemExit(main())
