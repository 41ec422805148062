"""A small residual network (3 stages of 16/32/64 channels, BatchNorm, identity and 1x1 shortcuts) on CIFAR-10.

    python examples/resnet_cifar10.py --data DIR [--epochs 10] [--blocks 1] [--device host|gpu|gpu:N|auto]

Built with the functional API (Input, layers called on tensors, Add for the shortcuts); see magmadnn.zoo.
"""

from magmadnn import cli, data, zoo


def main(argv=None):
    parser = cli.example_parser(__doc__, epochs=10, batch_size=64, lr=1e-3)
    parser.add_argument("--blocks", type=cli.positive_int, default=1, help="residual blocks per stage (default 1)")
    args = parser.parse_args(argv)
    split = data.load_cifar10(args.data, download=args.download)
    split = cli.limit_for_smoke_run(split, args.max_steps, args.batch_size)
    model = zoo.resnet_small(input_shape=split[0][0].shape[1:], num_classes=10, widths=(16, 32, 64),
                             blocks_per_stage=args.blocks)
    model.summary()
    return cli.fit_and_report(model, split, args, "cifar10")


if __name__ == "__main__":
    raise SystemExit(cli.run_guarded(main))
