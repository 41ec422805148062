"""The first example after the first install line: a fresh environment with the core install alone (numpy and
cuda-python, nothing optional) runs README's first magmadnn example as pasted."""

from __future__ import annotations

import subprocess
import venv
from pathlib import Path

import pytest

from tests.test_docs import README, ROOT, python_blocks

pytestmark = pytest.mark.slow


def _first_magmadnn_example() -> str:
    blocks = [source for _, source in python_blocks(README.read_text(encoding="utf-8")) if "import magmadnn" in source]
    assert blocks, "README.md has no magmadnn example"
    return blocks[0]


def test_readme_first_example_runs_on_the_core_install(tmp_path: Path):
    env_dir = tmp_path / "core-env"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    # --no-compile: the bytecode of what the install brings is not what this checks (the example compiles what it
    # imports), and writing it was a third of the install's CPU time
    install = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-compile",
                              str(ROOT)], capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stdout + install.stderr
    listed = subprocess.run([str(python), "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True)
    names = {line.split("==")[0].lower() for line in listed.stdout.split()}
    assert not names & {"scikit-learn", "torch", "safetensors", "keras", "onnx"}, sorted(names)
    script = tmp_path / "first_example.py"
    script.write_text(_first_magmadnn_example(), encoding="utf-8")
    run = subprocess.run([str(python), str(script)], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
