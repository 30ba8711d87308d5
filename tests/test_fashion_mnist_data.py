"""The offline Fashion-MNIST reader (examples/fashion_mnist.py) on files it writes, and on the real set."""
import gzip
import os

import numpy as np
import pytest

from examples import fashion_mnist


def write_idx(path, array, compress=True):
    header = bytes([0, 0, 8, array.ndim]) + b"".join(d.to_bytes(4, "big") for d in array.shape)
    with (gzip.open if compress else open)(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


def make_set(root, n_train=6, n_test=4):
    rng = np.random.default_rng(0)
    data = {}
    for split, n in (("train", n_train), ("test", n_test)):
        images, labels = rng.integers(0, 256, (n, 28, 28)), rng.integers(0, 10, n)
        img_stem, lab_stem = fashion_mnist.FILES[split]
        write_idx(os.path.join(root, img_stem + ".gz"), images)
        plain = split == "test"  # the reader takes plain files as well as gzip
        write_idx(os.path.join(root, lab_stem + ("" if plain else ".gz")), labels, compress=not plain)
        data[split] = images, labels
    return data


def test_reads_gzip_and_plain_idx(tmp_path):
    data = make_set(str(tmp_path))
    for split in ("train", "test"):
        images, labels = fashion_mnist.load(split, root=str(tmp_path), full=False)
        np.testing.assert_array_equal(images, data[split][0])
        np.testing.assert_array_equal(labels, data[split][1])
    with pytest.raises(ValueError, match="has 6 images, expected 60000"):
        fashion_mnist.load("train", root=str(tmp_path))


def test_missing_data_names_how_to_get_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="make data"):
        fashion_mnist.load("train", root=str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="train-images-idx3-ubyte.*make data"):
        fashion_mnist.load("train", root=str(tmp_path))


def test_corrupt_files_are_refused(tmp_path):
    make_set(str(tmp_path))
    path = tmp_path / (fashion_mnist.FILES["test"][0] + ".gz")
    with gzip.open(path, "wb") as f:
        f.write(b"\x00\x00\x08\x03" + (4).to_bytes(4, "big") + (28).to_bytes(4, "big") * 2 + b"short")
    with pytest.raises(ValueError, match="header says \\[4, 28, 28\\] values, file holds 5"):
        fashion_mnist.load("test", root=str(tmp_path), full=False)
    with gzip.open(path, "wb") as f:
        f.write(b"\x00\x00\x0d\x01")
    with pytest.raises(ValueError, match="not an IDX file of unsigned bytes"):
        fashion_mnist.load("test", root=str(tmp_path), full=False)


def test_shards_are_disjoint_and_complete():
    images, labels = np.arange(10 * 28 * 28).reshape(10, 28, 28), np.arange(10)
    parts = [fashion_mnist.shard(images, labels, r, 3)[1] for r in range(3)]
    assert sorted(np.concatenate(parts).tolist()) == list(range(10))


def test_the_installed_set_is_complete():
    """`make test` installs the Debian package first (Makefile target `data`)."""
    train, test = fashion_mnist.load("train"), fashion_mnist.load("test")
    assert train[0].shape == (60000, 28, 28) and test[0].shape == (10000, 28, 28)
    assert sorted(np.unique(train[1]).tolist()) == list(range(10))
    assert np.bincount(test[1]).tolist() == [1000] * 10
