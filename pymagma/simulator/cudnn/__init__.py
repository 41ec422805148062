"""cuDNN on the simulated device: NumPy models of the documented semantics of the calls that need a handle.

The real libcudnn still answers everything that needs no GPU (descriptor create/set/get, output-dimension queries,
the dropout reserve size); :class:`SimulatedCudnn` models only the handle-taking calls.  Each
call passes through a real ``ctypes.CFUNCTYPE`` built from pymagma's prototype, so arity and argument types are
converted and checked exactly as for the library.  The models trust nothing but what cuDNN itself would see: shapes,
strides, data types, padding, stride, dilation, groups and modes are read back from the real descriptors; data are
NumPy views on the (host) device pointers with the descriptors' strides; alpha/beta are read through their pointers
as float (half/float data) or double (double data).

Stream order: a model that touches device data is a generator.  Up to its ``yield`` it runs at the call (argument
and descriptor checks, descriptor reads, alpha/beta and other host values, as cuDNN reads them when called); the rest
(the device work) is queued on the stream the handle was given with ``cudnnSetStream`` and runs when the simulated
runtime orders it.  ``cudnnFind*AlgorithmEx``, which returns once it has run the algorithms, first runs the work
queued before it.

Semantics chosen where cuDNN leaves them open (a GPU may differ in these, and only in these):

* ``y = alpha * op(...) + beta * y``; with ``beta == 0`` the output is never read (it may hold NaN).
* Max pooling backward gives each window's gradient to the first maximum of ``x`` in row-major window order.
* Activation backward computes the derivative from ``x`` (``y`` is only checked for its shape).
* Dropout: cuDNN's random stream cannot be reproduced, so the mask comes from NumPy's Philox generator keyed by the
  descriptor's seed; the states buffer holds (seed, number of forward calls) and advances with every forward, the
  reserve space holds the bit-packed mask, and backward scales by the rate of the descriptor it is given.
* ``CUDNN_OP_TENSOR_NOT`` is logical negation (1 where ``alpha1 * A`` is 0, else 0).
* Algorithm queries list every algorithm of the kind as supported, with small made-up workspace sizes.

Modules: :mod:`.descriptors` (what a model reads: descriptors, pointers, scalars), :mod:`.numerics` (the NumPy
computations), :mod:`.dispatch` (the library object, the plumbing of a call and the models).
"""

from .descriptors import Descriptors, ModelError
from .dispatch import HOST_CALLS, SimulatedCudnn, is_host_call

__all__ = ["SimulatedCudnn", "HOST_CALLS", "is_host_call", "Descriptors", "ModelError"]
