"""Data-parallel training over MPI (mpi4py): ``model.fit(x, y, batch_size=b, distributed=True)``, or with
:class:`Options` (defaults: ``sync_batchnorm=False, bucket_mb=25, overlap=False, cuda_aware=None``), e.g.
``distributed=Options(sync_batchnorm=True)``.

Run the same script on every rank (``mpiexec -n N python train.py``). With ``distributed=True`` fit

* broadcasts rank 0's weights, state arrays (BatchNorm statistics) and shuffling stream to every rank at its start;
* gives each rank a disjoint shard of every global batch: the epoch order is one permutation drawn from the shared
  stream (the same one a single process would draw), global batch ``k`` is ``order[k*N*b : (k+1)*N*b]`` and rank
  ``r`` takes its ``r``-th slice of ``b`` samples; the last, uneven global batch is split the same way (a rank may
  get fewer samples, or none: it still takes part in the reduction with weight 0);
* sums the weighted gradients (weight: the rank's sample count), the weighted batch loss and the sample count over
  the ranks by in-place ``Allreduce`` on flat buffers, so that N ranks with per-rank batch ``b`` take exactly the
  steps of one process with batch ``N*b`` on the same order. The buffers are buckets of at most
  ``Options.bucket_mb`` MiB (default 25, as PyTorch DDP; a model under that size gets ONE fused buffer and one
  Allreduce per step), filled last layer first; ``Options(overlap=True)`` posts each bucket's ``Iallreduce`` from
  the backward pass as soon as its gradients are final (an autograd hook). The sum of each value does not depend on
  the bucketing: with 2 ranks the results are bit-identical to one fused buffer (tested; also seen with 3 ranks),
  with more the MPI library may choose another summation order for another message size (equal to rounding);
* sums the running loss/metric tallies (and validation, sharded over the ranks) over every rank at each read, so
  every rank logs the same global figures and callbacks such as EarlyStopping decide alike; progress updates are
  read at epoch end only (a timed read would be a collective call at a different batch on each rank);
* prints the progress bar on rank 0 only and runs the file-writing callbacks (ModelCheckpoint, CSVLogger) there only;
* with several ranks, limits each rank's BLAS/OpenMP threads to ``cores // ranks on the node`` unless the user set
  ``OMP_NUM_THREADS``/``OPENBLAS_NUM_THREADS``/``MKL_NUM_THREADS`` (see ``limit_threads_per_rank``).

Backends: on the host backend the buckets are NumPy buffers the gradients are copied into and read back from as
views. On the GPU backend they are page-locked host buffers (``cudaMallocHost``: the device-to-host copies run at
full speed) unless the MPI library is CUDA-aware: then each bucket is a device buffer, packed and unpacked by one
kernel per gradient and handed to MPI by address. :func:`cuda_aware_mpi` decides (``Options(cuda_aware=...)``
overrides): ``MAGMADNN_CUDA_AWARE_MPI=1|0``, else the MPI 4.1 info key ``mpi_memory_alloc_kinds`` (a ``cuda``
kind), else ``MPIX_Query_cuda_support()``; ``stats()`` says what was used and why.

BatchNorm: by default its statistics are local to each rank (each normalizes its own shard; running statistics are
rank 0's when it saves). ``Options(sync_batchnorm=True)`` synchronizes them, as PyTorch's SyncBatchNorm: in
training every BatchNorm layer normalizes with the mean and variance of the global batch (per channel, each rank's
count, mean and sum of squared deviations gathered by one Allgather and combined in rank order, so every rank gets
the same values) and its backward pass sums the two per-channel gradient sums over the ranks (one Allreduce), each
rank's weighted by its share of the loss; N ranks then train exactly as one process with batch ``N*b``, running
statistics included (the same on every rank), uneven last batches too: a rank without samples runs a one-sample
stand-in batch of weight 0 to take part in the layers' collectives. The layer math is written once against the op
set (``sync_batchnorm.SyncBatchNormTrainFunction``), so every backend runs the same code; the per-channel statistics
go through the host. Dropout streams are identical on every rank. Resume: every rank calls ``load_checkpoint`` on the
same file before ``fit(..., distributed=True)``.

Faults: :func:`install_abort_hook` (called by ``init``) makes an uncaught exception on any rank print that rank's
traceback and ``MPI.COMM_WORLD.Abort(1)`` the whole job instead of leaving the other ranks blocked in a collective.

Without mpi4py importing this package still works; ``is_available()`` is False and anything that needs MPI raises
:class:`MPIUnavailableError` naming ``pip install magmadnn[mpi]``.

One idea a module: :mod:`.environment` (MPI, ranks, threads per rank, abort), :mod:`.cuda_aware` (CUDA-aware MPI
detection), :mod:`.sharding` (each rank's part of a batch), :mod:`.buckets` (gradient buckets and the averager),
:mod:`.sync_batchnorm` (the BatchNorm group and its autograd function), :mod:`.data_parallel` (``Options``, fit's
set-up and the hook of the training step). There is one training step, ``Model``'s (``models.step.train_step``):
data parallelism joins it through a ``models.step.StepHook`` registered here on import (the models never import
this package).
"""

from ..models.step import register_data_parallel
from .buckets import GradientAverager, plan_buckets
from .cuda_aware import cuda_aware_mpi
from .data_parallel import DataParallel, Options, broadcast_model, setup_fit, stats
from .environment import (
    MPIUnavailableError,
    abort_if_several_ranks,
    barrier,
    comm,
    init,
    install_abort_hook,
    is_available,
    is_root,
    launched,
    limit_threads_per_rank,
    rank,
    ranks_on_this_node,
    size,
)
from .sharding import ShardedBatches, shard_indices
from .sync_batchnorm import BatchNormGroup, combine_moments

register_data_parallel(setup_fit)

__all__ = ["MPIUnavailableError", "is_available", "init", "comm", "rank", "size", "is_root", "install_abort_hook",
           "broadcast_model", "shard_indices", "ShardedBatches", "GradientAverager", "DataParallel", "barrier",
           "setup_fit", "stats", "launched", "limit_threads_per_rank", "ranks_on_this_node", "Options",
           "BatchNormGroup", "combine_moments", "cuda_aware_mpi", "plan_buckets", "abort_if_several_ranks"]
