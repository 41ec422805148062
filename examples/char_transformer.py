"""A GPT-style character model (zoo.char_transformer) trained on a text file, then sampling from it.

    python examples/char_transformer.py [--data FILE] [--epochs 4] [--batch-size 32] [--device host|gpu|gpu:N|auto]

FILE is any UTF-8 text (default: the Python documentation text that ships with CPython, ``pydoc_data.topics``).
The first 90 % trains (random windows of --context characters), the last 10 % validates; the validation loss is
reported in nats per character next to the unigram and bigram baselines of the same split.
"""

import math
import time

import numpy as np

from magmadnn import cli, zoo


def load_text(path):
    if path is None:
        import pydoc_data.topics as topics

        return "".join(topics.topics[k] for k in sorted(topics.topics))
    with open(path, encoding="utf-8") as f:
        return f.read()


def windows(ids, starts, context):
    """(x, y): int64 windows of ``context`` tokens and the next token at each position."""
    both = np.stack([ids[s: s + context + 1] for s in starts]).astype(np.int64)
    return both[:, :-1], both[:, 1:]


def baselines(train, val, vocab):
    """Unigram and bigram cross entropy (nats per character) of the validation text, counted on the training text
    (add-one smoothing)."""
    unigram = np.bincount(train, minlength=vocab) + 1.0
    unigram_nats = -np.mean(np.log(unigram[val[1:]] / unigram.sum()))
    pairs = np.ones((vocab, vocab))
    np.add.at(pairs, (train[:-1], train[1:]), 1.0)
    bigram_nats = -np.mean(np.log(pairs[val[:-1], val[1:]] / pairs[val[:-1]].sum(axis=1)))
    return float(unigram_nats), float(bigram_nats)


def sample(model, prompt, count, vocab, temperature, rng):
    """``count`` characters after ``prompt`` (``context`` token ids), one at a time on a sliding window."""
    window, out = list(prompt), []
    for _ in range(count):
        logits = model.predict(np.array([window], dtype=np.int64))[0, -1].astype(np.float64)
        p = np.exp((logits - logits.max()) / temperature)
        token = int(rng.choice(len(p), p=p / p.sum()))
        out.append(vocab[token])
        window = window[1:] + [token]
    return "".join(out)


def main(argv=None):
    parser = cli.example_parser(__doc__, epochs=4, batch_size=32, lr=3e-3)
    for action in parser._actions:  # --data is a text file here, not a dataset folder
        if "--data" in action.option_strings:
            action.metavar, action.help = "FILE", "UTF-8 text to learn (default: CPython's pydoc_data.topics)"
    parser.add_argument("--context", type=cli.positive_int, default=64, help="characters per window (default 64)")
    parser.add_argument("--dim", type=cli.positive_int, default=64, help="model width (default 64)")
    parser.add_argument("--heads", type=cli.positive_int, default=4, help="attention heads (default 4)")
    parser.add_argument("--blocks", type=cli.positive_int, default=2, help="transformer blocks (default 2)")
    parser.add_argument("--windows", type=cli.positive_int, default=4096,
                        help="random training windows (default 4096)")
    parser.add_argument("--val-windows", type=cli.positive_int, default=256,
                        help="validation windows, consecutive (default 256)")
    parser.add_argument("--sample-chars", type=int, default=300, help="characters to sample at the end (default 300)")
    parser.add_argument("--temperature", type=cli.positive_float, default=0.8, help="sampling temperature")
    args = parser.parse_args(argv)

    text = load_text(args.data)
    vocab = sorted(set(text))
    index = {c: i for i, c in enumerate(vocab)}
    ids = np.array([index[c] for c in text], dtype=np.int64)
    cut = int(0.9 * len(ids))
    train_ids, val_ids = ids[:cut], ids[cut:]
    if min(len(train_ids), len(val_ids)) <= args.context + 1:
        raise ValueError(f"--data: {len(ids)} characters are too few for --context {args.context} "
                         f"(each split needs more than {args.context + 1})")
    n_train, n_val = args.windows, args.val_windows
    if args.max_steps is not None:
        n_train = n_val = min(n_train, args.max_steps * args.batch_size)
    rng = np.random.default_rng(args.seed)
    x, y = windows(train_ids, rng.integers(0, len(train_ids) - args.context - 1, n_train), args.context)
    xv, yv = windows(val_ids, np.arange(0, len(val_ids) - args.context - 1, args.context)[:n_val], args.context)
    unigram, bigram = baselines(train_ids, val_ids, len(vocab))
    print(f"text: {len(text):,} characters, {len(vocab)} distinct; {n_train} training windows of {args.context}, "
          f"{len(xv)} validation windows; baselines on the validation text: unigram {unigram:.3f}, "
          f"bigram {bigram:.3f} nats/char")

    model = zoo.char_transformer((args.context,), len(vocab), dim=args.dim, heads=args.heads, blocks=args.blocks)
    device = cli.resolve_device(args.device)
    steps = args.epochs * -(-len(x) // args.batch_size)
    model.compile(cli.make_optimizer(args.optimizer, args.lr, args.schedule, steps), loss="cross_entropy",
                  seed=args.seed, device=device)
    print(f"model {model.name} ({model.count_params():,} parameters) on {model.device}, {args.optimizer} "
          f"lr={args.lr} ({args.schedule}), batch {args.batch_size}, {args.epochs} epoch(s)")
    timer = cli.Throughput(len(x))
    start = time.perf_counter()
    history = model.fit(x, y, batch_size=args.batch_size, epochs=args.epochs, validation_data=(xv, yv),
                        callbacks=[timer], verbose=0 if args.quiet else 1)
    seconds = time.perf_counter() - start
    val_loss = float(model.evaluate(xv, yv, batch_size=256, verbose=0))
    verdict = "below" if val_loss < bigram else "not below"
    print(f"validation loss {val_loss:.3f} nats/char ({val_loss / math.log(2):.3f} bits), {verdict} the bigram "
          f"baseline {bigram:.3f} (unigram {unigram:.3f}); {seconds:.0f} s for {args.epochs} epoch(s), "
          f"{timer.samples_per_second * args.context:,.0f} characters/s in training")
    text_out = ""
    if args.sample_chars > 0:
        prompt = [int(t) for t in val_ids[: args.context]]
        text_out = sample(model, prompt, args.sample_chars, vocab, args.temperature, rng)
        print(f"--- sample (temperature {args.temperature}) after {''.join(vocab[t] for t in prompt)!r}:\n{text_out}")
    return {"val_loss": val_loss, "unigram": unigram, "bigram": bigram, "train_seconds": seconds,
            "samples_per_second": timer.samples_per_second, "history": history, "sample": text_out}


if __name__ == "__main__":
    raise SystemExit(cli.run_guarded(main))
