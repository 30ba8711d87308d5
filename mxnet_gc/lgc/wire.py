"""The wire format of learned gradient compression: what each message holds, word by word.

A message is a float32 array (ps-lite sends float32 keys); integer words are the same 32 bits read as
uint32.  Every message starts with a header of three uint32 words: a magic (the kind), the step
(modulo 2**32) and the sender's rank (the leader's, in a result).  For the coded tensors of one server,
in layout order, tensor c has n_c values, k_c = count(density, n_c) leader indices and
i_c = count(innovation_density, n_c) innovation values.  Indices are bit-packed: each takes
b_c = max(1, ceil(log2 n_c)) bits, least significant bit first, tensor after tensor, in one stream
padded to whole words.  K = sum k_c; the coded vector has P = K rounded up to a multiple of 16 values;
the code has C * P / 16 floats (C latent channels).

    INDEX  (train phase, leader)   header | scales (the leader's, one float per tensor) | leader indices
    CAND   (index 'union', everyone) the sender's own scales | its top kc_c = ceil(k_c / W) indices per
                                   tensor, largest |value| first (its share: the servers make the step's
                                   INDEX from every worker's)
    LEAD   (lgc phase, leader)     header | scales | leader indices | code
    INNOV  (lgc phase, everyone)   header | innovation indices | values
    VECTOR (train phase, everyone) INNOV's fields | the vector (P floats: the values at the leader's
                                   indices, unscaled, zero padded)
    CODED  (lgc phase, everyone,   header | its own scales (per tensor, its largest |value| at the
            codes 'own')           leader's indices) | INNOV's fields after the header | the code of its
                                   own vector in its own scales | with option signs, a bit per vector
                                   value (P bits, 1 where the value is > 0, packed as indices)
    RESULT (server, every phase)   header | the leader's scales | leader indices | summed values at them
                                   (K floats) | every worker's innovation indices (rank order) | values
                                   added there | code (the leader's; zeros in the train phase and
                                   with codes 'own')

A result's innovation values are what the sum adds at those coordinates besides the K summed values
(zero for a coordinate among the leader's indices, which the K values already hold).
"""
import math

import numpy as np

from .options import STRIDE, count

MAGIC = {"INDEX": 0x4C474358, "CAND": 0x4C474341, "LEAD": 0x4C47434C, "INNOV": 0x4C474349, "VECTOR": 0x4C474356,
         "CODED": 0x4C474344, "RESULT": 0x4C474352}
HEADER = 3


def index_bits(n):
    """Bits of one index into an n-value tensor."""
    return max(1, int(math.ceil(math.log2(n)))) if n > 1 else 1


def pack_bits(values, widths):
    """Packs non-negative ints (each < 2**width) into uint32 words, least significant bit first."""
    values = np.asarray(values, np.uint64)
    widths = np.asarray(widths, np.int64)
    total = int(widths.sum())
    words = np.zeros((total + 31) // 32, np.uint32)
    if total == 0:
        return words
    starts = np.cumsum(widths) - widths
    owner = np.repeat(np.arange(len(values)), widths)
    shift = (np.arange(total) - np.repeat(starts, widths)).astype(np.uint64)
    bits = ((values[owner] >> shift) & np.uint64(1)).astype(np.uint8)
    packed = np.packbits(bits, bitorder="little")
    words.view(np.uint8)[:len(packed)] = packed
    return words


def unpack_bits(words, widths):
    """The ints ``pack_bits`` packed with ``widths``."""
    widths = np.asarray(widths, np.int64)
    total = int(widths.sum())
    if total == 0:
        return np.zeros(len(widths), np.int64)
    bits = np.unpackbits(np.asarray(words, np.uint32).view(np.uint8), bitorder="little")[:total].astype(np.int64)
    starts = np.cumsum(widths) - widths
    shift = np.arange(total) - np.repeat(starts, widths)
    return np.add.reduceat(bits << shift, starts)


class CorruptMessage(ValueError):
    """A message that does not follow the format (wrong size, magic or field)."""


class WireFormat:
    """The sizes and fields of every LGC message for one server's coded tensors."""

    def __init__(self, sizes, density, innovation_density, num_workers, latent_channels, signs=False):
        self.sizes = [int(n) for n in sizes]
        if not self.sizes or min(self.sizes) < 1:
            raise ValueError("lgc: a server needs at least one non-empty coded tensor, got sizes %s" % sizes)
        self.num_workers = num_workers
        self.k = [count(density, n) for n in self.sizes]
        self.ki = [count(innovation_density, n) for n in self.sizes]
        self.bits = [index_bits(n) for n in self.sizes]
        self.K = sum(self.k)
        self.padded = max(STRIDE, -(-self.K // STRIDE) * STRIDE)
        self.code_words = latent_channels * self.padded // STRIDE
        self.index_words = (sum(k * b for k, b in zip(self.k, self.bits)) + 31) // 32
        self.kc = [-(-k // num_workers) for k in self.k]  # a worker's candidates per tensor (index 'union')
        self.cand_index_words = (sum(k * b for k, b in zip(self.kc, self.bits)) + 31) // 32
        self.innov_index_words = (sum(k * b for k, b in zip(self.ki, self.bits)) + 31) // 32
        self.Ki = sum(self.ki)
        self.all_innov_index_words = (num_workers * sum(k * b for k, b in zip(self.ki, self.bits)) + 31) // 32
        scales = len(self.sizes)
        self.sign_words = (self.padded + 31) // 32 if signs else 0  # CODED: a bit per vector value (1: > 0)
        self.words = {
            "INDEX": HEADER + scales + self.index_words,
            "CAND": HEADER + scales + self.cand_index_words,
            "LEAD": HEADER + scales + self.index_words + self.code_words,
            "INNOV": HEADER + self.innov_index_words + self.Ki,
            "VECTOR": HEADER + self.innov_index_words + self.Ki + self.padded,
            "CODED": HEADER + scales + self.innov_index_words + self.Ki + self.code_words + self.sign_words,
            "RESULT": HEADER + scales + self.index_words + self.K + self.all_innov_index_words
                      + num_workers * self.Ki + self.code_words,
        }

    # ---- the pieces ----

    def _header(self, kind, step, rank):
        return np.array([MAGIC[kind], step % 2 ** 32, rank], np.uint32)

    def pack_indices(self, per_tensor, counts, copies=1):
        """One bit stream of per-tensor index arrays (each of its tensor's count; ``copies`` runs over the
        tensors, end to end)."""
        widths = np.tile(np.repeat(self.bits, counts), copies)
        return pack_bits(np.concatenate(per_tensor), widths)

    def unpack_indices(self, words, counts, copies=1):
        """Per-tensor index arrays (``copies`` streams' worth, tensor-major within each copy)."""
        widths = np.tile(np.repeat(self.bits, counts), copies)
        flat = unpack_bits(words, widths)
        out, at = [], 0
        for _ in range(copies):
            row = []
            for c, n in enumerate(counts):
                idx = flat[at:at + n]
                if n and idx.max() >= self.sizes[c]:
                    raise CorruptMessage("an index %d is out of tensor %d's %d values" % (idx.max(), c, self.sizes[c]))
                row.append(idx)
                at += n
            out.append(row)
        return out

    @staticmethod
    def _as_words(parts, size):
        out = np.concatenate([np.asarray(p).reshape(-1).view(np.uint32) if np.asarray(p).dtype != np.uint32
                              else np.asarray(p).reshape(-1) for p in parts])
        assert out.size == size, (out.size, size)
        return out.view(np.float32)

    # ---- messages ----

    def index_message(self, step, rank, scales, indices, kind="INDEX"):
        """INDEX, or with ``kind`` 'CAND' a worker's candidates (the same fields, ``kc`` indices a tensor)."""
        return self._as_words([self._header(kind, step, rank), np.asarray(scales, np.float32),
                               self.pack_indices(indices, self.kc if kind == "CAND" else self.k)], self.words[kind])

    def lead_message(self, step, rank, scales, indices, code):
        return self._as_words([self._header("LEAD", step, rank), np.asarray(scales, np.float32),
                               self.pack_indices(indices, self.k), np.asarray(code, np.float32)], self.words["LEAD"])

    def innov_message(self, step, rank, indices, values, vector=None, code=None, scales=None, signs=None):
        """INNOV; with ``vector`` VECTOR, with ``code`` and the worker's own ``scales`` CODED."""
        kind = "VECTOR" if vector is not None else "CODED" if code is not None else "INNOV"
        parts = [self._header(kind, step, rank)] + ([np.asarray(scales, np.float32)] if kind == "CODED" else []) + \
            [self.pack_indices(indices, self.ki), np.concatenate(values).astype(np.float32)]
        if kind != "INNOV":
            parts.append(np.asarray(vector if code is None else code, np.float32))
        if kind == "CODED" and self.sign_words:
            parts.append(pack_bits(np.asarray(signs, np.uint8), np.ones(self.padded, np.int64)))
        return self._as_words(parts, self.words[kind])

    def result_message(self, step, leader, scales, indices, sums, innov_indices, innov_values, code):
        """``innov_indices``/``innov_values``: per worker (rank order), per-tensor arrays."""
        stream = self.pack_indices([i for row in innov_indices for i in row], self.ki, self.num_workers)
        return self._as_words([self._header("RESULT", step, leader), np.asarray(scales, np.float32),
                               self.pack_indices(indices, self.k),
                               np.asarray(sums, np.float32), stream,
                               np.concatenate([v for row in innov_values for v in row]).astype(np.float32),
                               np.asarray(code, np.float32)], self.words["RESULT"])

    def read(self, kind, message, step=None):
        """The fields of a message as a dict; raises CorruptMessage for one that is not ``kind``."""
        words = np.asarray(message, np.float32).reshape(-1)
        if words.size != self.words[kind]:
            raise CorruptMessage("a %s message has %d words here, got %d" % (kind, self.words[kind], words.size))
        ints = words.view(np.uint32)
        if ints[0] != MAGIC[kind]:
            raise CorruptMessage("not a %s message (magic %#x)" % (kind, ints[0]))
        if step is not None and ints[1] != step % 2 ** 32:
            raise CorruptMessage("a %s message of step %d arrived in step %d" % (kind, ints[1], step))
        fields, at = {"step": int(ints[1]), "rank": int(ints[2])}, HEADER

        def take(n):
            nonlocal at
            at += n
            return words[at - n:at]

        if kind in ("INDEX", "CAND", "LEAD", "RESULT", "CODED"):
            fields["scales"] = take(len(self.sizes)).copy()
            if not np.all(np.isfinite(fields["scales"])) or np.any(fields["scales"] <= 0):
                raise CorruptMessage("scales must be finite and positive, got %s" % fields["scales"])
        if kind == "CAND":
            fields["indices"] = self.unpack_indices(take(self.cand_index_words).view(np.uint32), self.kc)[0]
        if kind in ("INDEX", "LEAD", "RESULT"):
            fields["indices"] = self.unpack_indices(take(self.index_words).view(np.uint32), self.k)[0]
        if kind == "RESULT":
            fields["sums"] = take(self.K).copy()
            fields["innov_indices"] = self.unpack_indices(take(self.all_innov_index_words).view(np.uint32), self.ki,
                                                          self.num_workers)
            values = take(self.num_workers * self.Ki)
            fields["innov_values"] = [self._split(values[w * self.Ki:(w + 1) * self.Ki], self.ki)
                                      for w in range(self.num_workers)]
        if kind in ("INNOV", "VECTOR", "CODED"):
            fields["innov_indices"] = self.unpack_indices(take(self.innov_index_words).view(np.uint32), self.ki)[0]
            fields["innov_values"] = self._split(take(self.Ki), self.ki)
        if kind == "VECTOR":
            fields["vector"] = take(self.padded).copy()
        if kind in ("LEAD", "CODED", "RESULT"):
            fields["code"] = take(self.code_words).copy()
        if kind == "CODED" and self.sign_words:
            fields["signs"] = unpack_bits(take(self.sign_words).view(np.uint32), np.ones(self.padded, np.int64))
        return fields

    @staticmethod
    def _split(values, counts):
        edges = np.cumsum([0] + list(counts))
        return [values[edges[i]:edges[i + 1]].copy() for i in range(len(counts))]
