"""Independent pure-numpy reference of the threshold codecs, written from the codecs' definition
(docs/codecs.md, docs/wire_format.md).

It works value by value with bit strings (no shared code with the kernels): each value's code is
written as a string of bits, high bit first, the strings are concatenated in value order, padded
with '0' to whole 32-bit words, and cut into bytes in memory order.
"""
import numpy as np


def rounding_of(params):
    """The rounding of a codec's params: as given, else 'nearest' for 4bit and for a gc_2bit threshold
    fitted by a store ('auto'), 'floor' for a 2bit threshold given as a number (MXNet's rule)."""
    return params.get("rounding") or ("nearest" if params["type"] == "4bit" or params.get("threshold") == "auto"
                                      else "floor")


def bounds_of(levels, rounding):
    """The decision bounds: the levels ('floor') or the midpoints below each level, 0 below the first
    ('nearest'), in float32."""
    levels = [np.float32(t) for t in levels]
    if rounding == "floor":
        return levels
    return [np.float32((np.float32(0) if k == 0 else levels[k - 1]) + levels[k]) * np.float32(0.5)
            for k in range(len(levels))]


def quantize(grad, residual, levels, rounding="floor"):
    """Per value: (level m, negative?, dequantized q, new residual), all float32 arithmetic; m = the
    number of decision bounds (bounds_of) at or below |residual + grad|.

    A non-finite residual + grad is dropped: m = 0, q = 0, the residual keeps its old value.
    """
    grad = np.asarray(grad, np.float32).ravel()
    residual = np.asarray(residual, np.float32).ravel()
    bounds = bounds_of(levels, rounding)
    levels = [np.float32(t) for t in levels]
    ms, negs, qs, new_res = [], [], [], []
    for g, r in zip(grad, residual):
        with np.errstate(over="ignore", invalid="ignore"):
            a = np.float32(r + g)
        if not np.isfinite(a):
            ms.append(0), negs.append(False), qs.append(np.float32(0)), new_res.append(r)
            continue
        m = sum(1 for d in bounds if abs(a) >= d)
        q = np.float32(0) if m == 0 else levels[m - 1]
        neg = bool(a < 0)
        q = -q if neg else q
        ms.append(m), negs.append(neg), qs.append(np.float32(q)), new_res.append(np.float32(a - q))
    return ms, negs, np.array(qs, np.float32), np.array(new_res, np.float32)


def code_bits_2bit(m, neg):
    """2bit (MXNet's): '11' = +t, '10' = -t, '00' = 0."""
    return "00" if m == 0 else ("10" if neg else "11")


def code_bits_4bit(m, neg):
    """4bit: code = s << 3 | m, s = 1 for negative; 0 is always '0000'."""
    return format(((1 if (neg and m) else 0) << 3) | m, "04b")


def code_bits_5bit(m, neg):
    """5bit: code = s << 4 | m, s = 1 for negative; 0 is always '00000'."""
    return format(((1 if (neg and m) else 0) << 4) | m, "05b")


def pull_levels(levels, workers, pull_bits=4):
    """The levels a compressed pull re-encodes the servers' sum on: the push levels times the number of
    workers (s_1 .. s_L); with 5 pull bits also half of s_1, the midpoint between each two neighbours
    and 1.5 s_L, in increasing order."""
    s = [float(np.float32(t)) * workers for t in levels]
    if pull_bits == 4:
        return [np.float32(x) for x in s]
    fine = sorted(set(s) | {s[0] / 2, 1.5 * s[-1]} | {(a + b) / 2 for a, b in zip(s, s[1:])})
    return [np.float32(x) for x in fine]


def pack(bit_strings):
    """Concatenate, pad to 32-bit words, cut into bytes in order."""
    bits = "".join(bit_strings)
    bits += "0" * (-len(bits) % 32)
    return np.array([int(bits[i:i + 8], 2) for i in range(0, len(bits), 8)], np.uint8)


def encode(bits, grad, residual, levels, rounding="floor"):
    """(payload bytes, new residual, dequantized values) as the codec must produce them."""
    ms, negs, qs, new_res = quantize(grad, residual, levels, rounding)
    code = {2: code_bits_2bit, 4: code_bits_4bit, 5: code_bits_5bit}[bits]
    return pack(code(m, n) for m, n in zip(ms, negs)), new_res, qs


def decode(bits, payload_bytes, n, levels):
    """Values of the first n codes of a payload (codes never produced decode to 0)."""
    width = bits
    bitstr = "".join(format(int(b), "08b") for b in payload_bytes)
    out = np.zeros(n, np.float32)
    for i in range(n):
        c = int(bitstr[i * width:(i + 1) * width], 2)
        if bits == 2:
            out[i] = levels[0] if c == 3 else (-levels[0] if c == 2 else 0)
        else:
            m, s = c & ((1 << (bits - 1)) - 1), c >> (bits - 1)
            if 0 < m <= len(levels):
                out[i] = -levels[m - 1] if s else levels[m - 1]
    return out


def quantize_array(grad, residual, levels, rounding="floor"):
    """Vectorized form of ``quantize`` for whole arrays: (dequantized values, new residual).

    Same rules, written with numpy array operations instead of a loop over values.
    """
    grad = np.asarray(grad, np.float32)
    residual = np.asarray(residual, np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        a = residual + grad
    mag = np.abs(a)
    bounds = np.asarray(bounds_of(levels, rounding), np.float32)
    levels = np.asarray(levels, np.float32)
    m = (mag[..., None] >= bounds).sum(-1)
    finite = np.isfinite(a)
    m = np.where(finite, m, 0)
    q = np.where(m > 0, levels[np.maximum(m - 1, 0)], np.float32(0)).astype(np.float32)
    q = np.where(a < 0, -q, q).astype(np.float32)
    new_residual = np.where(finite, a - q, residual).astype(np.float32)
    return q, new_residual
