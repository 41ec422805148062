"""VGG-16 (MagmaDNN's vgg16 example: five stages of 3x3 convolutions, BatchNorm, Dropout) on CIFAR-10.

    python examples/vgg_cifar10.py --data DIR [--epochs 30] [--width 1.0] [--device host|gpu|gpu:N|auto]

DIR holds the binary version (data_batch_1..5.bin, test_batch.bin, directly or in cifar-10-batches-bin/);
--download fetches and verifies the public archive into the cache. ``--width 0.25`` (a quarter of the channels)
trains on a CPU; the full width is for a GPU. See magmadnn.zoo.vgg_small.
"""

from magmadnn import cli, data, zoo


def main(argv=None):
    parser = cli.example_parser(__doc__, epochs=30, batch_size=128, lr=1e-3)
    parser.add_argument("--width", type=cli.positive_float, default=1.0,
                        help="scale of every layer's channels (default 1.0: VGG-16's 64..512)")
    args = parser.parse_args(argv)
    split = data.load_cifar10(args.data, download=args.download)
    split = cli.limit_for_smoke_run(split, args.max_steps, args.batch_size)
    model = zoo.vgg_small(input_shape=split[0][0].shape[1:], num_classes=10, width=args.width, seed=args.seed)
    model.summary()
    return cli.fit_and_report(model, split, args, "cifar10")


if __name__ == "__main__":
    raise SystemExit(cli.run_guarded(main))
