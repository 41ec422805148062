"""Data-parallel training on MNIST over MPI: every rank trains on its shard of each batch, gradients averaged.

    mpiexec -n 2 python examples/distributed_mnist.py --data DIR [--epochs 1] [--batch-size 32]
        [--model mlp|lenet5|cnn] [--device host|gpu|gpu:N|auto] [--max-steps N]
        [--sync-bn] [--bucket-mb MB|fused] [--overlap]

--batch-size is per rank: N ranks take steps of N x batch-size samples, exactly as one process with that batch would
(same order, same updates). Rank 0 prints the report: test accuracy, throughput over all ranks, time in Allreduce.
Without mpiexec it runs as a single rank. Needs mpi4py (pip install magmadnn[mpi]).

--sync-bn normalises with the statistics of the global batch (the cnn model has BatchNorm layers); --bucket-mb sets
the gradient buckets (default 25 MiB; fused: one buffer); --overlap starts each bucket's Allreduce during the backward
pass (see magmadnn.distributed.Options).

DIR holds the IDX files (train-*/t10k-*, .gz or raw); a folder with only the t10k test set is split 8,000/2,000.
"""

from magmadnn import cli, data, distributed, layers, zoo


def main(argv=None):
    parser = cli.example_parser(__doc__, epochs=1, batch_size=32, lr=1e-3)
    parser.add_argument("--model", choices=("mlp", "lenet5", "cnn"), default="mlp",
                        help="network (default mlp; cnn has BatchNorm layers)")
    parser.add_argument("--sync-bn", action="store_true", help="BatchNorm statistics of the global batch")
    parser.add_argument("--bucket-mb", type=cli.bucket_mb, default=25.0, metavar="MB|fused",
                        help="gradient bucket size in MiB, or fused: one buffer (default 25)")
    parser.add_argument("--overlap", action="store_true",
                        help="start each bucket's Allreduce during the backward pass")
    args = parser.parse_args(argv)
    options = distributed.Options(sync_batchnorm=args.sync_bn, bucket_mb=args.bucket_mb, overlap=args.overlap)
    world = distributed.init()  # any rank's uncaught exception now aborts the whole job
    rank, ranks = world.Get_rank(), world.Get_size()
    if args.download and rank == 0:
        data.load_mnist(args.data, download=True)  # one rank fetches, the others wait and read the files
    world.Barrier()
    split = data.load_mnist(args.data)
    split = cli.limit_for_smoke_run(split, args.max_steps, args.batch_size * ranks)
    (x_train, y_train), (x_test, y_test) = split
    model = zoo.build(args.model, x_train.shape[1:], 10, **({"batch_norm": True} if args.model == "cnn" else {}))
    steps = args.epochs * -(-len(x_train) // (args.batch_size * ranks))
    model.compile(optimizer=cli.make_optimizer(args.optimizer, args.lr, args.schedule, steps), loss="cross_entropy",
                  metrics=["accuracy"], seed=args.seed, device=cli.resolve_device(args.device))
    if args.sync_bn and not any(isinstance(layer, layers.BatchNorm) for layer in model.layers):
        parser.error(f"--sync-bn needs a model with BatchNorm layers (--model cnn), {args.model} has none")
    if rank == 0:
        print(cli.describe_data("mnist", split))
        print(f"model {model.name} on {model.device} x {ranks} rank(s), batch {args.batch_size} per rank "
              f"({args.batch_size * ranks} per step), {args.epochs} epoch(s); "
              + ", ".join(["sync BatchNorm"] * args.sync_bn
                          + [f"buckets of {args.bucket_mb:g} MiB" if args.bucket_mb else "one fused buffer"]
                          + ["overlap"] * args.overlap))
    timer = cli.Throughput(len(x_train))
    history = model.fit(x_train, y_train, batch_size=args.batch_size, epochs=args.epochs,
                        validation_data=(x_test, y_test), callbacks=[timer], verbose=0 if args.quiet else 1,
                        distributed=options)
    figures = distributed.stats()
    logs = {k: v[-1] for k, v in history.history.items()}
    if rank == 0:
        print(f"test accuracy {logs['val_accuracy']:.4f} ({logs['val_accuracy'] * 100:.2f}%), test loss "
              f"{logs['val_loss']:.4f}")
        print(f"throughput {timer.samples_per_second:,.0f} samples/s over {ranks} rank(s), "
              f"{sum(timer.seconds):.1f} s total; Allreduce {figures['allreduce_ms_per_step']:.2f} ms/step "
              f"({figures['buffer_values']:,} values in {figures['buckets']} buckets, {figures['steps']} steps)")
    return {"test_accuracy": logs["val_accuracy"], "test_loss": logs["val_loss"], "ranks": ranks,
            "samples_per_second": timer.samples_per_second, "history": history, **figures}


if __name__ == "__main__":
    raise SystemExit(cli.run_guarded(main))
