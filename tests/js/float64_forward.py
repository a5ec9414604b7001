#!/usr/bin/env python3
"""A float64 forward pass of the decoder-only test models (tests/js/float64.test.mjs), written from
the architectures' definitions as llama.cpp applies them, independently of qkv's C++: llama
(adjacent-pair RoPE, linear scaling, Llama 3.1's per-frequency factors), qwen2 (QKV biases), qwen3
(per-head Q/K RMSNorm; also with YaRN scaling), gemma (sqrt(dim)-scaled embeddings, tanh-GELU gate), gemma2 (post-norms, soft-caps, a sliding window
on even layers), gemma3 (post-norms, Q/K norms, five windowed layers of each six with RoPE base
10000 unscaled, the global ones with the model's base and scaling); the NEOX RoPE (halves) for
all but llama; phi3 (fused QKV and gate/up, LongRoPE factors and attention factor); gpt2
(LayerNorm, learned positions, fused QKV, biases, GELU); qwen3moe (Qwen3's attention, a router
softmax over the experts, the top expert_used_count renormalised to sum 1, SwiGLU experts);
cohere2 (one bias-free LayerNorm feeding parallel attention and feed-forward, three of each four
layers windowed with adjacent-pair RoPE, the fourth global without RoPE, logits times
logit_scale, the classifier the token embedding). Every tensor must be f32.

  python3 float64_forward.py MODEL.gguf IDS.json   (IDS.json: {"ids": [...]})

prints {"logits": [...]} for the last position."""
import json, math, struct, sys
from gguf_read import read_gguf
path, idsfile = sys.argv[1], sys.argv[2]
meta, tens, b, base = read_gguf(path)
def T(name, scale=1.0):
    dims, ty, off = tens[name]; assert ty == 0, (name, ty)
    n = 1
    for d in dims: n *= d
    v = struct.unpack_from('<%df' % n, b, base + off)
    if len(dims) == 1: return list(v)
    c = dims[0]; return [list(v[r*c:(r+1)*c]) for r in range(n // c)]
A = meta['general.architecture']; g = lambda k, d=None: meta.get(A + '.' + k, d)
dim = g('embedding_length'); L = g('block_count'); H = g('attention.head_count'); KV = g('attention.head_count_kv')
gpt2 = A == 'gpt2'; cohere2 = A == 'cohere2'; layer_norm = gpt2 or cohere2
eps = g('attention.layer_norm_epsilon') if layer_norm else g('attention.layer_norm_rms_epsilon'); fb = g('rope.freq_base', 10000.0)
hd = g('attention.key_length', dim // H); nrot = g('rope.dimension_count', hd)
neox = A in ('qwen2', 'qwen3', 'qwen3moe', 'gemma', 'gemma2', 'gemma3', 'phi3')
gemma = A.startswith('gemma')
lin = g('rope.scaling.factor', 0) if g('rope.scaling.type', 'linear') == 'linear' else 0
window = g('attention.sliding_window', 0)
attn_cap = g('attn_logit_softcapping', 0) if A == 'gemma2' else 0
final_cap = g('final_logit_softcapping', 0) if A == 'gemma2' else 0
# Per-frequency divisors of the angles: Llama 3.1's rope_freqs, or Phi-3's LongRoPE factors (the
# long set when the context, the model's own here, exceeds the original one), and a factor on
# cos and sin (rope.scaling.attn_factor).
freq_factors = T('rope_freqs.weight') if 'rope_freqs.weight' in tens else None
if 'rope_factors_long.weight' in tens:
    orig = g('rope.scaling.original_context_length')
    freq_factors = T('rope_factors_long.weight' if g('context_length') > orig else 'rope_factors_short.weight')
mscale = g('rope.scaling.attn_factor', 1.0)
# YaRN (as llama.cpp applies it to these architectures): pairs below the correction range keep the
# unscaled angle, pairs above take 1/factor, a linear ramp between; cos and sin times 1 + 0.1 ln(factor).
yarn = g('rope.scaling.type', 'linear') == 'yarn'
if yarn:
    yf = g('rope.scaling.factor'); orig = g('rope.scaling.original_context_length', g('context_length'))
    corr = lambda beta: nrot * math.log(orig / (beta * 2 * math.pi)) / (2 * math.log(fb))
    y_lo, y_hi = max(0.0, math.floor(corr(32))), min(nrot - 1.0, math.ceil(corr(1)))
    mscale *= 1 + 0.1 * math.log(yf)
elif g('rope.scaling.type', 'linear') != 'linear': sys.exit('float64_forward.py: %s RoPE scaling is not modelled' % g('rope.scaling.type'))
def is_swa(l):
    if A == 'gemma3': return window > 0 and (l + 1) % 6 != 0
    if A == 'gemma2': return window > 0 and l % 2 == 0
    if cohere2: return l % g('attention.sliding_window_pattern', 4) < g('attention.sliding_window_pattern', 4) - 1
    return False
emb = T('token_embd.weight'); out = T('output.weight') if 'output.weight' in tens and not cohere2 else emb
def mv(W, x): return [sum(w * xi for w, xi in zip(row, x)) for row in W]
def rms(x, w): s = math.sqrt(sum(v*v for v in x) / len(x) + eps); return [v / s * gg for v, gg in zip(x, w)]
def norm(x, w, b):  # GPT-2: LayerNorm with a bias; Cohere 2: without; the others: RMSNorm
    if not layer_norm: return rms(x, w)
    m = sum(x) / len(x); s = math.sqrt(sum((v - m) ** 2 for v in x) / len(x) + eps)
    return [(v - m) / s * gg + (b[i] if b else 0.0) for i, (v, gg) in enumerate(zip(x, w))]
def add(x, b): return [a + c for a, c in zip(x, b)] if b else x
def rope(v, pos, base_, scale):
    v = v[:]; half = nrot // 2
    for i in range(half):
        th = pos * scale * base_ ** (-2 * i / nrot) / (freq_factors[i] if freq_factors else 1.0)
        if yarn:
            ramp = 1 - min(1.0, max(0.0, (i - y_lo) / max(0.001, y_hi - y_lo)))
            th = th / yf * (1 - ramp) + th * ramp
        c, s = math.cos(th), math.sin(th)
        a_i, b_i = (i, i + half) if neox else (2 * i, 2 * i + 1)
        a, bb = v[a_i], v[b_i]; v[a_i] = (a*c - bb*s) * mscale; v[b_i] = (a*s + bb*c) * mscale
    return v
def gelu(x): return 0.5 * x * (1 + math.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
def opt(n): return T(n) if n in tens else None
W = []
for l in range(L):
    pfx = 'blk.%d.' % l
    names = ['attn_norm','attn_q','attn_k','attn_v','attn_qkv','attn_output','ffn_norm','ffn_gate','ffn_up','ffn_down','attn_q_norm','attn_k_norm','post_attention_norm','post_ffw_norm',
             'ffn_gate_inp','ffn_gate_exps','ffn_up_exps','ffn_down_exps','attn_add_q','attn_add_k','attn_add_v']
    W.append({k: opt(pfx + k + '.weight') for k in names})
    for k in names: W[l][k + '.b'] = opt(pfx + k + '.bias')
pos_emb = T('position_embd.weight') if gpt2 else None
req = json.load(open(idsfile)); ids = req['ids']
# Attention kinds (docs/attention-kinds.md): additive layers score v . tanh(W_q q + W_k k) per
# head; block-sparse layers are dense attention under the pattern's mask, given by the caller
# (mask[p][j]: query position p sees key j).
kinds = g('attention.layer_kinds', ['softmax'] * L); da = g('attention.additive.length', 0); smask = req.get('mask')
def score(l, hh, qh, kj):
    if kinds[l] != 'additive': return sum(a*c for a, c in zip(qh, kj)) / math.sqrt(hd)
    w = W[l]; r0 = hh * da
    return sum(w['attn_add_v'][hh][a] * math.tanh(sum(wq * qi for wq, qi in zip(w['attn_add_q'][r0 + a], qh)) +
                                                  sum(wk * ki for wk, ki in zip(w['attn_add_k'][r0 + a], kj))) for a in range(da))
K = [[] for _ in range(L)]; V = [[] for _ in range(L)]
for pos, tok in enumerate(ids):
    x = emb[tok][:]
    if gemma: x = [v * math.sqrt(dim) for v in x]
    if gpt2: x = add(x, pos_emb[pos])
    for l in range(L):
        w = W[l]; h = norm(x, w['attn_norm'], w['attn_norm.b'])
        if w['attn_qkv']:  # fused: the q rows, then k, then v
            y = add(mv(w['attn_qkv'], h), w['attn_qkv.b']); q, k, v = y[:H*hd], y[H*hd:(H+KV)*hd], y[(H+KV)*hd:]
        else:
            q = add(mv(w['attn_q'], h), w['attn_q.b']); k = add(mv(w['attn_k'], h), w['attn_k.b']); v = add(mv(w['attn_v'], h), w['attn_v.b'])
        qs = [q[i*hd:(i+1)*hd] for i in range(H)]; ks = [k[i*hd:(i+1)*hd] for i in range(KV)]
        if w['attn_q_norm']: qs = [rms(x_, w['attn_q_norm']) for x_ in qs]; ks = [rms(x_, w['attn_k_norm']) for x_ in ks]
        local = is_swa(l)
        base_, scale = (10000.0, 1.0) if (A == 'gemma3' and local) else (fb, 1.0 / lin if lin else 1.0)
        if not gpt2 and (local or not cohere2): qs = [rope(x_, pos, base_, scale) for x_ in qs]; ks = [rope(x_, pos, base_, scale) for x_ in ks]
        K[l].append(sum(ks, [])); V[l].append(v)
        o = []
        for hh in range(H):
            kh = hh // (H // KV); qh = qs[hh]
            js = [j for j in range(pos + 1) if not (local and pos - j >= window) and (kinds[l] != 'block_sparse' or smask[pos][j])]
            sc = [score(l, hh, qh, K[l][j][kh*hd:(kh+1)*hd]) for j in js]
            if attn_cap: sc = [attn_cap * math.tanh(s_ / attn_cap) for s_ in sc]
            m = max(sc); e = [math.exp(s_ - m) for s_ in sc]; z = sum(e)
            o += [sum(e[t] / z * V[l][j][kh*hd + d_] for t, j in enumerate(js)) for d_ in range(hd)]
        a = add(mv(w['attn_output'], o), w['attn_output.b'])
        if w['post_attention_norm']: a = rms(a, w['post_attention_norm'])
        if not cohere2:  # (Cohere 2: the feed-forward reads the attention's input norm)
            x = [p_ + c for p_, c in zip(x, a)]; a = None
            h = norm(x, w['ffn_norm'], w['ffn_norm.b'])
        if w['ffn_gate_inp']:  # experts: router softmax, top k renormalised, SwiGLU each
            E = g('expert_count'); kk = g('expert_used_count'); z = mv(w['ffn_gate_inp'], h); mz = max(z)
            pr = [math.exp(v - mz) for v in z]; sp = sum(pr); pr = [v / sp for v in pr]
            top = sorted(range(E), key=lambda e: (-pr[e], e))[:kk]; sw = sum(pr[e] for e in top)
            f = [0.0] * dim
            for e in top:
                n_ff = len(w['ffn_gate_exps']) // E
                gt = mv(w['ffn_gate_exps'][e*n_ff:(e+1)*n_ff], h); u = mv(w['ffn_up_exps'][e*n_ff:(e+1)*n_ff], h)
                y = mv(w['ffn_down_exps'][e*dim:(e+1)*dim], [gg / (1 + math.exp(-gg)) * uu for gg, uu in zip(gt, u)])
                f = [fv + pr[e] / sw * yv for fv, yv in zip(f, y)]
            x = [p_ + c for p_, c in zip(x, f)]
            continue
        u = add(mv(w['ffn_up'], h), w['ffn_up.b'])
        if gpt2: f = [gelu(uu) for uu in u]
        else:
            if w['ffn_gate']: gt = mv(w['ffn_gate'], h)
            else: gt, u = u[:len(u) // 2], u[len(u) // 2:]  # Phi-3: gate rows, then up rows
            f = [(gelu(gg) if gemma else gg / (1 + math.exp(-gg))) * uu for gg, uu in zip(gt, u)]
        f = add(mv(w['ffn_down'], f), w['ffn_down.b'])
        if w['post_ffw_norm']: f = rms(f, w['post_ffw_norm'])
        x = [p_ + c + (a[i] if a else 0.0) for i, (p_, c) in enumerate(zip(x, f))]
x = norm(x, T('output_norm.weight'), opt('output_norm.bias'))
logits = mv(out, x)
if final_cap: logits = [final_cap * math.tanh(v / final_cap) for v in logits]
if cohere2: logits = [v * g('logit_scale') for v in logits]
print(json.dumps({'logits': logits}))
