"""An LSTM reading MNIST row by row: 28 steps of 28 pixels, the last step's state into the 10 logits.

    python examples/lstm_mnist_rows.py --data DIR [--epochs 4] [--batch-size 128] [--units 128] [--device host|gpu|auto]

DIR holds the IDX files (train-*/t10k-*, .gz or raw); a folder with only the t10k test set is split 8,000/2,000.
"""

from magmadnn import cli, data, zoo


def as_rows(x):
    """(N, 1, H, W) images as (N, H, W) sequences: H steps of W features."""
    return x.reshape(len(x), x.shape[-2], x.shape[-1])


def main(argv=None):
    parser = cli.example_parser(__doc__, epochs=4, batch_size=128, lr=3e-3)
    parser.add_argument("--units", type=cli.positive_int, default=128, help="LSTM units (default 128)")
    args = parser.parse_args(argv)
    (x_train, y_train), (x_test, y_test) = data.load_mnist(args.data, download=args.download)
    split = ((as_rows(x_train), y_train), (as_rows(x_test), y_test))
    split = cli.limit_for_smoke_run(split, args.max_steps, args.batch_size)
    model = zoo.lstm_classifier(split[0][0].shape[1:], num_classes=10, units=args.units)
    model.summary()
    return cli.fit_and_report(model, split, args, "mnist rows")


if __name__ == "__main__":
    raise SystemExit(cli.run_guarded(main))
