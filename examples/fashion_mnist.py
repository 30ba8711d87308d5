"""Fashion-MNIST (60k train / 10k test, 28x28 grey images, 10 classes) read offline from IDX files.

The files come from Debian's package ``dataset-fashion-mnist`` (``make data`` installs it) in
/usr/share/datasets/fashion-mnist, or from the folder named by ``FASHION_MNIST_DIR``:
train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz,
t10k-labels-idx1-ubyte.gz (gzip or plain).  Gluon's own FashionMNIST class would download the files
and checks a SHA-1 that Debian's recompressed copies do not match, hence this reader.
"""
import gzip
import os

import numpy as np

DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"
FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
         "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}
SIZES = {"train": 60000, "test": 10000}
HOW_TO_GET = ("install it with `make data` (Debian: apt-get install dataset-fashion-mnist) or set "
              "FASHION_MNIST_DIR to a folder holding the four Fashion-MNIST IDX files")


def data_dir():
    return os.environ.get("FASHION_MNIST_DIR", DEFAULT_DIR)


def read_idx(path):
    """An IDX file (unsigned bytes, any rank) as a numpy array."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise ValueError("%s is not an IDX file of unsigned bytes (header %r)" % (path, data[:4]))
    rank = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(rank)]
    body = data[4 + 4 * rank:]
    if len(body) != int(np.prod(dims)):
        raise ValueError("%s: header says %s values, file holds %d" % (path, dims, len(body)))
    return np.frombuffer(body, np.uint8).reshape(dims)


def _find(root, stem):
    for name in (stem + ".gz", stem):
        if os.path.exists(os.path.join(root, name)):
            return os.path.join(root, name)
    raise FileNotFoundError("Fashion-MNIST file %s(.gz) not found in %s; %s" % (stem, root, HOW_TO_GET))


def load(split, root=None, full=True):
    """(images uint8 [n, 28, 28], labels uint8 [n]) of 'train' or 'test'.

    ``full`` checks that the split is complete (60000 or 10000 images).
    """
    root = root or data_dir()
    if not os.path.isdir(root):
        raise FileNotFoundError("Fashion-MNIST folder %s does not exist; %s" % (root, HOW_TO_GET))
    images, labels = (read_idx(_find(root, stem)) for stem in FILES[split])
    if images.ndim != 3 or images.shape[1:] != (28, 28) or labels.shape != (images.shape[0],):
        raise ValueError("Fashion-MNIST %s: images %s and labels %s do not fit" % (split, images.shape, labels.shape))
    if full and images.shape[0] != SIZES[split]:
        raise ValueError("Fashion-MNIST %s has %d images, expected %d" % (split, images.shape[0], SIZES[split]))
    return images, labels


def shard(images, labels, rank, num_workers):
    """Worker ``rank``'s part: every num_workers-th example, so each worker sees all classes."""
    return images[rank::num_workers], labels[rank::num_workers]
