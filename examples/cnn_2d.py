"""A small 2-D CNN (two 3x3 conv + max-pool blocks, a 128-unit dense layer, dropout) on MNIST or Fashion-MNIST.

    python examples/cnn_2d.py --data DIR [--fashion] [--epochs 3] [--device host|gpu|gpu:N|auto]

Without --data it uses the cache ($MAGMADNN_DATA or ~/.cache/magmadnn; --download fills it).
"""

from magmadnn import cli, data, zoo


def main(argv=None):
    parser = cli.example_parser(__doc__, epochs=3, batch_size=64, lr=1e-3)
    parser.add_argument("--fashion", action="store_true", help="Fashion-MNIST instead of MNIST")
    args = parser.parse_args(argv)
    kind = "fashion" if args.fashion else "mnist"
    split = data.load_mnist(args.data, kind=kind, download=args.download)
    split = cli.limit_for_smoke_run(split, args.max_steps, args.batch_size)
    model = zoo.small_cnn(input_shape=split[0][0].shape[1:], num_classes=10, filters=(16, 32), dense=128,
                          dropout=0.25, seed=args.seed)
    model.summary()
    return cli.fit_and_report(model, split, args, kind)


if __name__ == "__main__":
    raise SystemExit(cli.run_guarded(main))
