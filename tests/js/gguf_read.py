"""The GGUF reader of the float64 reference passes (float64_forward.py, vision_forward.py):
metadata and tensor directory as the format defines them, independently of qkv's C++ loader."""
import struct


def read_gguf(path):
    """Returns (meta, tensors, data, base): tensors maps a name to (dims, type, offset); a
    tensor's bytes start at data[base + offset]."""
    b = open(path, 'rb').read()
    p = 0

    def rd(fmt):
        nonlocal p
        v = struct.unpack_from('<' + fmt, b, p)
        p += struct.calcsize('<' + fmt)
        return v[0]

    def rs():
        nonlocal p
        n = rd('Q')
        s = b[p:p + n].decode('utf-8', 'replace')
        p += n
        return s

    def rv(t):
        if t == 8: return rs()
        if t == 9:
            it = rd('I'); n = rd('Q')
            return [rv(it) for _ in range(n)]
        return rd({0: 'B', 1: 'b', 2: 'H', 3: 'h', 4: 'I', 5: 'i', 6: 'f', 7: '?', 10: 'Q', 11: 'q', 12: 'd'}[t])

    assert b[:4] == b'GGUF'
    p = 4
    rd('I')  # version
    nt = rd('Q'); nkv = rd('Q')
    meta = {}
    for _ in range(nkv):
        k = rs(); t = rd('I'); meta[k] = rv(t)
    tens = {}
    for _ in range(nt):
        name = rs(); nd = rd('I'); dims = [rd('Q') for _ in range(nd)]; ty = rd('I'); off = rd('Q')
        tens[name] = (dims, ty, off)
    al = meta.get('general.alignment', 32)
    return meta, tens, b, (p + al - 1) // al * al
