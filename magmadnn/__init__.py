"""magmadnn: deep learning in Python on the host (NumPy) or a GPU (pymagma)."""

__version__ = "0.1.0"
