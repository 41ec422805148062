"""A variational autoencoder on MNIST digits, a subclassed model as Keras' guide writes it: the encoder, the
sampling and the decoder in ``call``, the KL term added with ``add_loss``, the reconstruction loss compiled.

    python examples/vae.py --data DIR [--epochs 5] [--latent 2] [--device host|gpu|gpu:N|auto]

DIR holds the MNIST IDX files (train-*/t10k-*, .gz or raw).
"""

import numpy as np

import magmadnn as mdnn
from magmadnn import F, cli, data
from magmadnn import layers as L


@mdnn.models.register
class VAE(mdnn.Model):
    def __init__(self, pixels=784, latent_dim=2, hidden=128, **kwargs):
        super().__init__(**kwargs)
        self.pixels, self.latent_dim, self.hidden = pixels, latent_dim, hidden
        self.encoder = L.Dense(hidden, activation="relu")
        self.z_mean, self.z_log_var = L.Dense(latent_dim), L.Dense(latent_dim)
        self.decoder = [L.Dense(hidden, activation="relu"), L.Dense(pixels, activation="sigmoid")]
        self.noise = np.random.default_rng(self.seed)

    def call(self, x, training=None):
        h = self.encoder(x)
        z_mean, z_log_var = self.z_mean(h), self.z_log_var(h)
        kl = -0.5 * (1 + z_log_var - z_mean * z_mean - F.exponential(z_log_var))
        self.add_loss(F.mean(F.sum(kl, axis=1)))
        z = z_mean
        if training:  # the reparameterisation trick: z = mean + exp(log_var / 2) * eps
            eps = self.noise.standard_normal(z_mean.shape).astype(np.float32)
            z = z_mean + F.exponential(0.5 * z_log_var) * mdnn.Tensor(eps, backend=self.xp)
        for layer in self.decoder:
            z = layer(z)
        return z

    def get_config(self):
        return {"pixels": self.pixels, "latent_dim": self.latent_dim, "hidden": self.hidden}


def main(argv=None):
    parser = cli.example_parser(__doc__, epochs=5, batch_size=64, lr=1e-3)
    parser.add_argument("--latent", type=cli.positive_int, default=2, help="latent size (default 2)")
    args = parser.parse_args(argv)
    (x_train, _), (x_test, _) = cli.limit_for_smoke_run(data.load_mnist(args.data, download=args.download),
                                                        args.max_steps, args.batch_size)
    x_train, x_test = (a.reshape(len(a), -1).astype(np.float32) for a in (x_train, x_test))
    vae = VAE(pixels=x_train.shape[1], latent_dim=args.latent, seed=args.seed)
    # Keras' guide sums the reconstruction loss over the pixels: binary cross entropy (a mean) times the pixels
    vae.compile(mdnn.optimizers.Adam(args.lr), mdnn.losses.BinaryCrossentropy(), loss_weights=x_train.shape[1],
                device=cli.resolve_device(args.device))
    history = vae.fit(x_train, x_train, epochs=args.epochs, batch_size=args.batch_size,
                      verbose=0 if args.quiet else 1)
    test_loss = vae.evaluate(x_test, x_test, batch_size=args.batch_size)
    print(f"test loss (reconstruction + KL) {test_loss:.4f}")
    return {"history": history, "vae": vae, "test_loss": test_loss}


if __name__ == "__main__":
    raise SystemExit(cli.run_guarded(main))
