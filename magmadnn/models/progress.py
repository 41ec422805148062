"""A one-line training progress bar: batches done, loss and metrics, throughput in images/s."""

from __future__ import annotations

import sys
import time

__all__ = ["ProgressBar", "format_logs"]


def format_logs(logs: dict) -> str:
    return " - ".join(f"{key}: {value:.4f}" if isinstance(value, float) else f"{key}: {value}"
                      for key, value in logs.items())


class ProgressBar:
    """``verbose=1``: a bar redrawn in place (at most every ``interval`` seconds) and a final line per epoch;
    ``verbose=2``: only the final line per epoch; ``verbose=0``: nothing."""

    def __init__(self, epoch: int, epochs: int, total_batches: int | None, verbose: int = 1, stream=None,
                 interval: float = 0.1, width: int = 24):
        self.epoch, self.epochs, self.total = epoch, epochs, total_batches
        self.verbose, self.stream, self.interval, self.width = verbose, stream or sys.stdout, interval, width
        self.start = time.perf_counter()
        self._last_draw = self.start
        self._stopped = None
        self.samples = 0
        self.live = verbose == 1 and hasattr(self.stream, "isatty") and self.stream.isatty()
        self.clear = "\033[K" if self.live else ""
        if verbose == 1:
            self.stream.write(f"Epoch {epoch + 1}/{epochs}\n")

    @property
    def images_per_second(self) -> float:
        """Training throughput (validation time excluded once ``stop_clock`` was called)."""
        elapsed = (self._stopped or time.perf_counter()) - self.start
        return self.samples / elapsed if elapsed > 0 else 0.0

    def stop_clock(self) -> None:
        """Mark the end of the training batches of this epoch."""
        self._stopped = time.perf_counter()

    def _bar(self, done: int) -> str:
        if not self.total:
            return f"{done}"
        filled = int(self.width * done / self.total)
        arrow = ">" if filled < self.width else ""
        bar = "=" * filled + arrow + "." * (self.width - filled - len(arrow))
        return f"{done:>{len(str(self.total))}}/{self.total} [{bar}]"

    def add_samples(self, samples: int) -> None:
        self.samples += samples

    def due(self) -> bool:
        """Whether a progress update is due (``interval`` seconds since the last one); the caller then reads the
        running figures and calls ``draw``."""
        now = time.perf_counter()
        if now - self._last_draw < self.interval:
            return False
        self._last_draw = now
        return True

    def draw(self, batches_done: int, logs: dict) -> None:
        """Redraw the bar in place (a live terminal with ``verbose=1`` only)."""
        if not self.live:
            return
        self.stream.write(f"\r{self._bar(batches_done)} - {format_logs(logs)} - "
                          f"{self.images_per_second:,.0f} img/s{self.clear}")
        self.stream.flush()

    def finish(self, batches_done: int, logs: dict) -> None:
        if not self.verbose:
            return
        elapsed = time.perf_counter() - self.start
        if self.verbose == 1:
            prefix = ("\r" if self.live else "") + self._bar(batches_done)
        else:
            prefix = f"Epoch {self.epoch + 1}/{self.epochs}"
        self.stream.write(f"{prefix} - {elapsed:.1f}s - {format_logs(logs)} - "
                          f"{self.images_per_second:,.0f} img/s{self.clear}\n")
        self.stream.flush()
