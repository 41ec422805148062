"""The host keeps the memory NumPy frees (``backend/host/_memory.py``): arrays made and freed batch after batch
reuse it, with no page faults, unless ``MAGMADNN_HOST_MALLOC=0``."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt (Linux)")

_FAULTS = """
import resource
import numpy as np
import magmadnn.backend.host as host
from magmadnn.backend.host import _memory
x = np.ones((32, 32, 256), np.float32)
for _ in range(3):
    y = host.activation_forward(x * 2, "relu")
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    y = host.activation_forward(x * 2, "relu")  # two 1 MiB arrays made and freed each time
    del y
print(_memory.keep_freed_memory(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _run(setting: str):
    env = dict(os.environ, MAGMADNN_HOST_MALLOC=setting)
    out = subprocess.run([sys.executable, "-c", _FAULTS], capture_output=True, text=True, env=env, check=True,
                         timeout=120).stdout.split()
    return out[0] == "True", int(out[1])


@pytest.mark.slow  # two fresh interpreters import magmadnn
def test_freed_arrays_are_reused_without_page_faults():
    kept, faults = _run("1")
    if not kept:
        pytest.skip("not glibc: mallopt is not there")
    off, faults_off = _run("0")
    assert not off
    assert faults_off > 500  # glibc's defaults: every 1 MiB array faults its 256 pages in again
    assert faults < 50, faults
