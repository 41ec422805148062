"""LeNet-5 on MNIST: two 5x5 convolutions with max pooling, then 120-84-10 dense layers.

    python examples/lenet5.py --data DIR [--epochs 3] [--batch-size 32] [--device host|gpu|gpu:N|auto]
                              [--max-steps N]

--device gpu runs on the current GPU (on a CPU: PYMAGMA_SIMULATOR=1 runs pymagma's simulator); --max-steps N trains
on at most N batches per epoch (a smoke run).

DIR holds the IDX files (train-*/t10k-*, .gz or raw); a folder with only the t10k test set is split 8,000/2,000.
"""

from magmadnn import cli, data, zoo


def main(argv=None):
    args = cli.example_parser(__doc__, epochs=3, batch_size=32, lr=2e-3).parse_args(argv)
    split = data.load_mnist(args.data, download=args.download)
    split = cli.limit_for_smoke_run(split, args.max_steps, args.batch_size)
    model = zoo.lenet5(input_shape=split[0][0].shape[1:], num_classes=10)
    model.summary()
    return cli.fit_and_report(model, split, args, "mnist")


if __name__ == "__main__":
    raise SystemExit(cli.run_guarded(main))
