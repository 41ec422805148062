"""A GAN on MNIST digits as Keras' guide writes it: two models, two optimizers, one ``fit`` through a custom
``train_step`` (gradients with ``magmadnn.grad``, updates with ``optimizer.apply``).

    python examples/gan.py --data DIR [--epochs 5] [--latent 32] [--device host|gpu|gpu:N|auto]

DIR holds the MNIST IDX files (train-*/t10k-*, .gz or raw).
"""

import numpy as np

import magmadnn as mdnn
from magmadnn import cli, data
from magmadnn import layers as L


class GAN(mdnn.Model):
    def __init__(self, discriminator, generator, latent_dim, seed=0):
        super().__init__(seed=seed)
        self.discriminator, self.generator, self.latent_dim = discriminator, generator, latent_dim
        self.noise = np.random.default_rng(seed)

    def compile(self, d_optimizer, g_optimizer, loss_fn, device=None):
        super().compile(device=device)
        self.d_optimizer, self.g_optimizer, self.loss_fn = d_optimizer, g_optimizer, loss_fn

    def latent(self, n):
        return mdnn.Tensor(self.noise.standard_normal((n, self.latent_dim)).astype(np.float32), backend=self.xp)

    def train_step(self, real_images):
        n = real_images.shape[0]
        fake_images = self.generator(self.latent(n))
        combined = mdnn.F.concatenate([fake_images, real_images], axis=0)
        labels = np.concatenate([np.ones((n, 1)), np.zeros((n, 1))]).astype(np.float32)
        # the guide's label noise (labels += 0.05 * uniform), kept inside [0, 1] as binary cross entropy requires
        labels = 0.95 * labels + 0.05 * self.noise.random(labels.shape).astype(np.float32)
        d_weights = self.discriminator.trainable_weights
        d_loss = self.loss_fn(labels, self.discriminator(combined, training=True))
        self.d_optimizer.apply(mdnn.grad(d_loss, d_weights), d_weights)

        misleading = np.zeros((n, 1), np.float32)  # "all real": the generator's target
        g_weights = self.generator.trainable_weights
        g_loss = self.loss_fn(misleading, self.discriminator(self.generator(self.latent(n), training=True)))
        self.g_optimizer.apply(mdnn.grad(g_loss, g_weights), g_weights)
        return {"d_loss": d_loss, "g_loss": g_loss}


def build(latent_dim, pixels, seed=0):
    discriminator = mdnn.Sequential([L.Input((pixels,)), L.Dense(128), L.LeakyReLU(0.2), L.Dense(1)],
                                    name="discriminator", seed=seed)
    generator = mdnn.Sequential([L.Input((latent_dim,)), L.Dense(128), L.LeakyReLU(0.2),
                                 L.Dense(pixels, activation="sigmoid")], name="generator", seed=seed + 1)
    return GAN(discriminator, generator, latent_dim, seed=seed)


def main(argv=None):
    parser = cli.example_parser(__doc__, epochs=5, batch_size=64, lr=3e-4)
    parser.add_argument("--latent", type=cli.positive_int, default=32, help="latent size (default 32)")
    args = parser.parse_args(argv)
    split = cli.limit_for_smoke_run(data.load_mnist(args.data, download=args.download), args.max_steps,
                                    args.batch_size)
    images = split[0][0].reshape(len(split[0][0]), -1).astype(np.float32)
    gan = build(args.latent, images.shape[1], seed=args.seed)
    gan.compile(mdnn.optimizers.Adam(args.lr), mdnn.optimizers.Adam(args.lr),
                mdnn.losses.BinaryCrossentropy(from_logits=True), device=cli.resolve_device(args.device))
    history = gan.fit(images, epochs=args.epochs, batch_size=args.batch_size, verbose=0 if args.quiet else 1)
    print(f"d_loss {history.history['d_loss'][-1]:.4f} g_loss {history.history['g_loss'][-1]:.4f}")
    return {"history": history, "gan": gan}


if __name__ == "__main__":
    raise SystemExit(cli.run_guarded(main))
