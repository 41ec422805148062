"""Grid search of an MLP's width and learning rate, trials in parallel (MPI ranks or local processes).

    python examples/grid_search.py [--data DIR] [--workers 2] [--epochs 3] [--batch-size 32]
    mpiexec -n 2 python examples/grid_search.py [--data DIR]

Without --data it searches on the 8x8 digits that ship with scikit-learn; with --data DIR on MNIST (IDX files).
Under mpiexec the trials are spread over the ranks, else over --workers local processes (1: serially); each trial is
seeded from --seed and its index, so the table is the same whichever way it ran. Prints the table, best first.
"""

from functools import partial

from magmadnn import cli, data, distributed, optimizers, tuning, zoo

GRID = {"units": [32, 128], "lr": [3e-3, 1e-2], "activation": ["relu", "tanh"]}


def build(params, seed, input_shape):
    """One trial's model: an MLP with one hidden layer of ``units``, Adam at ``lr``, weights from ``seed``."""
    model = zoo.mlp(input_shape=input_shape, num_classes=10, hidden=(params["units"],),
                    activation=params["activation"])
    model.compile(optimizer=optimizers.Adam(params["lr"]), loss="cross_entropy", metrics=["accuracy"], seed=seed)
    return model


def main(argv=None):
    parser = cli.example_parser(__doc__, epochs=3, batch_size=32, lr=1e-3)
    parser.add_argument("--workers", type=cli.positive_int, default=2, help="local processes without MPI (default 2)")
    args = parser.parse_args(argv)
    split = data.load_mnist(args.data, download=args.download) if args.data else data.load_digits()
    split = cli.limit_for_smoke_run(split, args.max_steps, args.batch_size)
    build_fn = partial(build, input_shape=tuple(split[0][0].shape[1:]))  # picklable for worker processes
    fit_kwargs = {"batch_size": args.batch_size, "epochs": args.epochs}
    result = tuning.grid_search(build_fn, GRID, split, fit_kwargs=fit_kwargs,
                                objective="val_accuracy", mode="max", seed=args.seed, workers=args.workers)
    if distributed.rank() == 0:
        print(result.table())
        best = result.best
        print(f"best: {best.params} val_accuracy {best.metrics['val_accuracy']:.4f}" if best else "every trial failed")
    return result


if __name__ == "__main__":
    raise SystemExit(cli.run_guarded(main))
