#!/usr/bin/env python3
"""A float64 forward pass of the decoder-only test models (tests/js/float64.test.mjs), written from
the architectures' definitions as llama.cpp applies them, independently of qkv's C++: llama
(adjacent-pair RoPE, linear scaling, Llama 3.1's per-frequency factors), qwen2 (QKV biases), qwen3 (per-head Q/K RMSNorm), gemma
(sqrt(dim)-scaled embeddings, tanh-GELU gate), gemma2 (post-norms, soft-caps, a sliding window
on even layers), gemma3 (post-norms, Q/K norms, five windowed layers of each six with RoPE base
10000 unscaled, the global ones with the model's base and scaling); the NEOX RoPE (halves) for
all but llama. Every tensor must be f32.

  python3 float64_forward.py MODEL.gguf IDS.json   (IDS.json: {"ids": [...]})

prints {"logits": [...]} for the last position."""
import json, math, struct, sys
path, idsfile = sys.argv[1], sys.argv[2]
b = open(path, 'rb').read(); p = 0
def rd(fmt):
    global p
    v = struct.unpack_from('<' + fmt, b, p); p += struct.calcsize('<' + fmt); return v[0]
def rs():
    global p
    n = rd('Q'); s = b[p:p+n].decode('utf-8', 'replace'); p += n; return s
def rv(t):
    if t == 8: return rs()
    if t == 9:
        it = rd('I'); n = rd('Q'); return [rv(it) for _ in range(n)]
    return rd({0:'B',1:'b',2:'H',3:'h',4:'I',5:'i',6:'f',7:'?',10:'Q',11:'q',12:'d'}[t])
assert b[:4] == b'GGUF'; p = 4
ver = rd('I'); nt = rd('Q'); nkv = rd('Q')
meta = {}
for _ in range(nkv):
    k = rs(); t = rd('I'); meta[k] = rv(t)
tens = {}
for _ in range(nt):
    name = rs(); nd = rd('I'); dims = [rd('Q') for _ in range(nd)]; ty = rd('I'); off = rd('Q'); tens[name] = (dims, ty, off)
al = meta.get('general.alignment', 32); base = (p + al - 1) // al * al
def T(name, scale=1.0):
    dims, ty, off = tens[name]; assert ty == 0, (name, ty)
    n = 1
    for d in dims: n *= d
    v = struct.unpack_from('<%df' % n, b, base + off)
    if len(dims) == 1: return list(v)
    c = dims[0]; return [list(v[r*c:(r+1)*c]) for r in range(n // c)]
A = meta['general.architecture']; g = lambda k, d=None: meta.get(A + '.' + k, d)
dim = g('embedding_length'); L = g('block_count'); H = g('attention.head_count'); KV = g('attention.head_count_kv')
eps = g('attention.layer_norm_rms_epsilon'); fb = g('rope.freq_base', 10000.0)
hd = g('attention.key_length', dim // H); nrot = g('rope.dimension_count', hd)
neox = A in ('qwen2', 'qwen3', 'gemma', 'gemma2', 'gemma3', 'phi3')
gemma = A.startswith('gemma')
lin = g('rope.scaling.factor', 0) if g('rope.scaling.type', 'linear') == 'linear' else 0
window = g('attention.sliding_window', 0)
attn_cap = g('attn_logit_softcapping', 0) if A == 'gemma2' else 0
final_cap = g('final_logit_softcapping', 0) if A == 'gemma2' else 0
freq_factors = T('rope_freqs.weight') if 'rope_freqs.weight' in tens else None  # Llama 3.1: theta_i / factor_i
for name in tens:
    if (name.startswith('rope_') and name != 'rope_freqs.weight') or name.endswith('attn_qkv.weight') or name == 'position_embd.weight':
        sys.exit('float64_forward.py: %s is not modelled' % name)
if g('rope.scaling.type', 'linear') != 'linear': sys.exit('float64_forward.py: only linear RoPE scaling is modelled')
def is_swa(l):
    if A == 'gemma3': return window > 0 and (l + 1) % 6 != 0
    if A == 'gemma2': return window > 0 and l % 2 == 0
    return False
emb = T('token_embd.weight'); out = T('output.weight') if 'output.weight' in tens else emb
def mv(W, x): return [sum(w * xi for w, xi in zip(row, x)) for row in W]
def rms(x, w): s = math.sqrt(sum(v*v for v in x) / len(x) + eps); return [v / s * gg for v, gg in zip(x, w)]
def rope(v, pos, base_, scale):
    v = v[:]; half = nrot // 2
    for i in range(half):
        th = pos * scale * base_ ** (-2 * i / nrot) / (freq_factors[i] if freq_factors else 1.0); c, s = math.cos(th), math.sin(th)
        a_i, b_i = (i, i + half) if neox else (2 * i, 2 * i + 1)
        a, bb = v[a_i], v[b_i]; v[a_i] = a*c - bb*s; v[b_i] = a*s + bb*c
    return v
def gelu(x): return 0.5 * x * (1 + math.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
def opt(n): return T(n) if n in tens else None
W = []
for l in range(L):
    pfx = 'blk.%d.' % l
    W.append({k: opt(pfx + k + '.weight') for k in ['attn_norm','attn_q','attn_k','attn_v','attn_output','ffn_norm','ffn_gate','ffn_up','ffn_down','attn_q_norm','attn_k_norm','post_attention_norm','post_ffw_norm']})
    for k in ['attn_q', 'attn_k', 'attn_v']: W[l][k + '.b'] = opt(pfx + k + '.bias')
ids = json.load(open(idsfile))['ids']
K = [[] for _ in range(L)]; V = [[] for _ in range(L)]
for pos, tok in enumerate(ids):
    x = emb[tok][:]
    if gemma: x = [v * math.sqrt(dim) for v in x]
    for l in range(L):
        w = W[l]; h = rms(x, w['attn_norm'])
        q = mv(w['attn_q'], h); k = mv(w['attn_k'], h); v = mv(w['attn_v'], h)
        if w['attn_q.b']: q = [a + c for a, c in zip(q, w['attn_q.b'])]; k = [a + c for a, c in zip(k, w['attn_k.b'])]; v = [a + c for a, c in zip(v, w['attn_v.b'])]
        qs = [q[i*hd:(i+1)*hd] for i in range(H)]; ks = [k[i*hd:(i+1)*hd] for i in range(KV)]
        if w['attn_q_norm']: qs = [rms(x_, w['attn_q_norm']) for x_ in qs]; ks = [rms(x_, w['attn_k_norm']) for x_ in ks]
        local = is_swa(l)
        base_, scale = (10000.0, 1.0) if (A == 'gemma3' and local) else (fb, 1.0 / lin if lin else 1.0)
        qs = [rope(x_, pos, base_, scale) for x_ in qs]; ks = [rope(x_, pos, base_, scale) for x_ in ks]
        K[l].append(sum(ks, [])); V[l].append(v)
        o = []
        for hh in range(H):
            kh = hh // (H // KV); qh = qs[hh]
            js = [j for j in range(pos + 1) if not (local and pos - j >= window)]
            sc = [sum(a*c for a, c in zip(qh, K[l][j][kh*hd:(kh+1)*hd])) / math.sqrt(hd) for j in js]
            if attn_cap: sc = [attn_cap * math.tanh(s_ / attn_cap) for s_ in sc]
            m = max(sc); e = [math.exp(s_ - m) for s_ in sc]; z = sum(e)
            o += [sum(e[t] / z * V[l][j][kh*hd + d_] for t, j in enumerate(js)) for d_ in range(hd)]
        a = mv(w['attn_output'], o)
        if w['post_attention_norm']: a = rms(a, w['post_attention_norm'])
        x = [p_ + c for p_, c in zip(x, a)]
        h = rms(x, w['ffn_norm'])
        gt = mv(w['ffn_gate'], h); u = mv(w['ffn_up'], h)
        f = [(gelu(gg) if gemma else gg / (1 + math.exp(-gg))) * uu for gg, uu in zip(gt, u)]
        f = mv(w['ffn_down'], f)
        if w['post_ffw_norm']: f = rms(f, w['post_ffw_norm'])
        x = [p_ + c for p_, c in zip(x, f)]
x = rms(x, T('output_norm.weight'))
logits = mv(out, x)
if final_cap: logits = [final_cap * math.tanh(v / final_cap) for v in logits]
print(json.dumps({'logits': logits}))
