"""``numpy.linalg``-shaped linear algebra on MAGMA: NumPy in -> NumPy out, DeviceArray in -> DeviceArray out, stacks of
matrices over leading dimensions.

LAPACK routines work on column-major data, so each input matrix is transposed on the device once into a
column-major work copy (results come back as views with column-major strides, no second copy); the copies, leading
dimensions and BLAS calls on them are the column-major face :mod:`pymagma._colmajor`, shared with the hybrid
drivers.  Where the provider lacks a driver but has its parts (PyTorch's bundled MAGMA has getrf, laswp and trsm but
no getrs/gesv) the solve is composed exactly from them.  ``info < 0`` becomes ``ValueError`` naming MAGMA's
argument; ``info > 0`` becomes :class:`pymagma.LinAlgError` naming the failing pivot or minor.

Where the provider lacks a driver entirely, ``cholesky``, ``cho_solve``, ``qr``, ``lstsq``, ``eigh`` and ``svd`` run
the hybrid CPU+GPU drivers of :mod:`pymagma.hybrid` (panels and small dense solvers on the host, BLAS updates on the
device) and ``eig`` runs NumPy's LAPACK on the host.  ``method="native"|"hybrid"`` forces a path; :func:`paths` says
which one ``"auto"`` takes for each function on the current provider.  Results are NumPy 2's named tuples
(``EighResult``, ``SVDResult``, ...); NumPy results keep an input's ndarray subclass where numpy.linalg does, and
dtypes numpy.linalg refuses are its TypeError.  ``norm``, ``matrix_power`` and ``multi_dot`` are built on MAGMA's
BLAS (nrm2, asum, gemm) and on :func:`svd` / :func:`inv`.

Topics: :mod:`.lu` (LU, solve, inv, det), :mod:`.cholesky`, :mod:`.qr` (QR, least squares), :mod:`.eigen`,
:mod:`.svd` (SVD, pinv, rank, cond), :mod:`.norms` (norms and products); shared helpers in :mod:`._common`.
"""

from .._colmajor import copy as colmajor_copy  # noqa: F401  (the names below stay reachable as pymagma.linalg.X)
from ..errors import LinAlgError
from ._common import (  # noqa: F401
           BLAS_ONLY,
           BUILT_ON,
           METHODS,
           NATIVE_NEEDS,
           EighResult,
           EigResult,
           QRResult,
           SlogdetResult,
           SVDResult,
           _routine,
           check_info,
           paths,
)
from .cholesky import cho_solve, cholesky
from .eigen import eig, eigh, eigvals, eigvalsh, real_eigvecs  # noqa: F401
from .lu import _getrf, det, inv, lu_factor, lu_solve, slogdet, solve  # noqa: F401
from .norms import _chain_order, matrix_power, multi_dot, norm  # noqa: F401
from .qr import lstsq, qr
from .svd import cond, matrix_rank, pinv, svd

__all__ = ["solve", "lu_factor", "lu_solve", "inv", "det", "slogdet", "cholesky", "cho_solve", "qr", "lstsq",
           "eigh", "svd", "eig", "eigvalsh", "eigvals", "pinv", "matrix_rank", "cond", "norm", "matrix_power",
           "multi_dot", "paths", "LinAlgError",
           "EigResult", "EighResult", "QRResult", "SlogdetResult", "SVDResult"]
