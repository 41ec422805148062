"""A VGG-style CNN with batch normalisation (three 3x3 conv-BN-ReLU-pool blocks) on CIFAR-10.

    python examples/cifar10_cnn.py --data DIR [--epochs 10] [--device host|gpu|gpu:N|auto]

DIR holds the binary version (data_batch_1..5.bin, test_batch.bin, directly or in cifar-10-batches-bin/);
--download fetches and verifies the public archive into the cache.
"""

from magmadnn import cli, data, zoo


def main(argv=None):
    args = cli.example_parser(__doc__, epochs=10, batch_size=64, lr=1e-3).parse_args(argv)
    split = data.load_cifar10(args.data, download=args.download)
    split = cli.limit_for_smoke_run(split, args.max_steps, args.batch_size)
    model = zoo.small_cnn(input_shape=split[0][0].shape[1:], num_classes=10, filters=(32, 64, 128), dense=256,
                          batch_norm=True, dropout=0.3, seed=args.seed)
    model.summary()
    return cli.fit_and_report(model, split, args, "cifar10")


if __name__ == "__main__":
    raise SystemExit(cli.run_guarded(main))
