"""A multi-layer perceptron (784-256-128-10, ReLU) on MNIST or Fashion-MNIST.

    python examples/mnist_mlp.py --data DIR [--fashion] [--epochs 5] [--device host|gpu|gpu:N|auto]

DIR holds the IDX files (train-*/t10k-*, .gz or raw); a folder with only the t10k test set is split 8,000/2,000.
"""

from magmadnn import cli, data, zoo


def main(argv=None):
    parser = cli.example_parser(__doc__, epochs=5, batch_size=64, lr=1e-3)
    parser.add_argument("--fashion", action="store_true", help="Fashion-MNIST instead of MNIST")
    args = parser.parse_args(argv)
    kind = "fashion" if args.fashion else "mnist"
    split = data.load_mnist(args.data, kind=kind, download=args.download)
    split = cli.limit_for_smoke_run(split, args.max_steps, args.batch_size)
    model = zoo.mlp(input_shape=split[0][0].shape[1:], num_classes=10, hidden=(256, 128))
    model.summary()
    return cli.fit_and_report(model, split, args, kind)


if __name__ == "__main__":
    raise SystemExit(cli.run_guarded(main))
