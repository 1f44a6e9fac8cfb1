"""Training data: the source a Data layer names, a deterministic sample order from the solver's
random seed, and an I/O thread that prefetches the next minibatch (thesis §7.2.2).

Sources: ``sklearn:digits`` (scikit-learn's bundled 8x8 digits, no download; a fixed random 80 %
of the 1797 images train, the rest test) and a ``.npz`` file with arrays ``data`` (N, ...) and
``label`` (N,) (used whole in both phases), and optionally ``cont`` (N, T): each sample's
sequence-continuation flags, the third top of a Data layer feeding an LSTM's ``cont``."""
from __future__ import annotations

import threading
import zipfile
from pathlib import Path

import numpy as np

from .common import DTYPE, TrainError

DIGITS_TRAIN_FRACTION = 0.8
# The split's own seed (not the solver's): the images are stored in blocks of writers, so a
# split by position holds later writers out (an RBF SVM tops at 95.8 % there); a fixed shuffle
# holds out a random fifth, the usual evaluation of this set.
DIGITS_SPLIT_SEED = 0


def load_digits(phase: str) -> tuple:
    """The ``sklearn:digits`` source's split: ((N, 1, 8, 8) float64 pixels 0..16, labels) of
    `phase` ("TRAIN": a fixed random 80 % of the 1797 images; "TEST": the other 20 %)."""
    if phase not in ("TRAIN", "TEST"):
        raise TrainError(f"phase must be 'TRAIN' or 'TEST', got {phase!r}")
    try:
        from sklearn.datasets import load_digits as sklearn_digits
    except ImportError:
        raise TrainError("source 'sklearn:digits' needs scikit-learn: "
                         "pip install 'swsim[digits]'") from None
    digits = sklearn_digits()
    images, labels = digits.images[:, None, :, :], digits.target
    order = np.random.default_rng(DIGITS_SPLIT_SEED).permutation(len(labels))
    split = int(len(labels) * DIGITS_TRAIN_FRACTION)
    part = order[:split] if phase == "TRAIN" else order[split:]
    return images[part], labels[part]


def _npz(path: Path, where: str):
    try:
        with np.load(path) as archive:
            arrays = {name: archive[name] for name in ("data", "label", "cont")
                      if name in archive}
            files = sorted(archive.files)
    except (OSError, zipfile.BadZipFile) as exc:
        raise TrainError(f"{where}: cannot read {path}: {exc}") from None
    except ValueError:          # numpy's guess at pickled data: neither a .npz nor a .npy
        raise TrainError(f"{where}: {path} is not a .npz archive of arrays (numpy.savez)") \
            from None
    if "data" not in arrays or "label" not in arrays:
        raise TrainError(f"{where}: {path} must hold arrays 'data' and 'label', has {files}")
    data, label, cont = arrays["data"], arrays["label"], arrays.get("cont")
    if data.ndim < 2 or label.shape != (len(data),):
        raise TrainError(f"{where}: data must be (N, ...) and label (N,), got {data.shape} and "
                         f"{label.shape}")
    if cont is not None and (cont.ndim != 2 or len(cont) != len(data)):
        raise TrainError(f"{where}: cont must be (N, T) with N = {len(data)}, got {cont.shape}")
    return data, label, cont


class Dataset:
    """The samples of one phase, scaled by ``data_param.scale``, as float32."""

    def __init__(self, source: str, phase: str, scale: float = 1.0, where: str = "data_param"):
        cont = None
        if source == "sklearn:digits":
            data, label = load_digits(phase)
        elif source.endswith(".npz"):
            data, label, cont = _npz(Path(source), f"{where}.source")
        else:
            raise TrainError(f"{where}.source: {source!r} is neither 'sklearn:digits' nor a "
                             f".npz file")
        self.data = (np.asarray(data, np.float64) * scale).astype(DTYPE)
        self.label = np.asarray(label).astype(DTYPE)
        self.cont = None if cont is None else np.asarray(cont).astype(DTYPE)
        if len(self.label) == 0:
            raise TrainError(f"{where}.source: {source!r} has no samples")

    def __len__(self) -> int:
        return len(self.label)

    @property
    def sample_shape(self) -> tuple:
        return self.data.shape[1:]


class Order:
    """Sample i of the endless stream is permutation_{i // n}[i % n], each epoch's permutation
    drawn from (seed, epoch): batch k is a pure function of k, so a run resumes by position."""

    def __init__(self, dataset: Dataset, batch_size: int, seed: int, shuffle: bool = True):
        self.dataset, self.batch_size, self.seed, self.shuffle = dataset, batch_size, seed, shuffle
        self._epochs = {}

    def _permutation(self, epoch: int) -> np.ndarray:
        if epoch not in self._epochs:
            n = len(self.dataset)
            self._epochs = {epoch: np.random.default_rng([self.seed, epoch]).permutation(n)
                            if self.shuffle else np.arange(n)}
        return self._epochs[epoch]

    def indices(self, k: int) -> np.ndarray:
        n = len(self.dataset)
        stream = np.arange(k * self.batch_size, (k + 1) * self.batch_size)
        return np.concatenate([self._permutation(int(e))[stream[stream // n == e] % n]
                               for e in np.unique(stream // n)])

    def batch(self, k: int) -> tuple:
        """(data, label), and the samples' ``cont`` rows when the set has them."""
        index = self.indices(k)
        arrays = (self.dataset.data, self.dataset.label, self.dataset.cont)
        return tuple(array[index] for array in arrays if array is not None)


class Prefetcher:
    """Hands out batches 0, 1, 2, ... of an Order; while the caller works on batch k, a thread
    gathers batch k + 1. ``position`` is the number of batches handed out."""

    def __init__(self, order: Order, position: int = 0):
        self.order, self.position = order, position
        self._thread, self._next = None, None
        self._start(position)

    def _start(self, k: int) -> None:
        result = {}

        def load():
            result["batch"] = self.order.batch(k)

        self._next = (k, result)
        self._thread = threading.Thread(target=load, name=f"swsim-prefetch-{k}", daemon=True)
        self._thread.start()

    def next(self):
        self._thread.join()
        k, result = self._next
        assert k == self.position
        self.position += 1
        self._start(self.position)
        return result["batch"]
