#!/usr/bin/env python3
"""A float64 image-encoder forward pass (tests/js/vision.test.mjs), written from the definitions of
Hugging Face's CLIP / SigLIP vision models and image processors, independently of qkv's C++:
RGBA bytes -> PIL-style bicubic resize (a = -0.5, support widened when shrinking; CLIP: shorter side
to `size` then the centre crop, SigLIP: straight to size x size) -> /255, (v - mean) / std -> patch
convolution (stride = patch) + bias -> class token first -> learned positions (bicubic a = -0.75,
align_corners=False, when the grid differs: PyTorch's F.interpolate) -> pre LayerNorm -> pre-norm
layers (LayerNorm, attention with biases, LayerNorm, fc1 -> GELU (tanh) or quick GELU -> fc2) ->
post LayerNorm -> class token or mean of the patches -> visual_projection -> L2 normalisation.
Reads llama.cpp's mmproj tensor names; F32 and F16 tensors.

  python3 vision_forward.py MODEL.gguf INPUT.json
  INPUT: {"width", "height", "rgba": [...], "size": N|null, "resize": "crop"|"squash"|null,
          "pooling": "cls"|"mean"|null, "normalize": bool, "project": bool}
prints {"embedding": [...]}, with "attention": true in INPUT also {"attention": [layer][head][query][key]};
with "classify": true instead {"probabilities": [...], "labels": [...]}: the classifier head
v.head.weight [dim, n_classes] + v.head.bias on the model's own pooled state (class token, else the
mean of the patches) after post LayerNorm and before any projection, then softmax."""
import json, math, struct, sys
from gguf_read import read_gguf
path, inpath = sys.argv[1], sys.argv[2]
meta, tens, b, base = read_gguf(path)
def flat(name):
    dims, ty, off = tens[name]; assert ty in (0, 1), (name, ty)
    n = 1
    for d in dims: n *= d
    return list(struct.unpack_from('<%d%s' % (n, 'f' if ty == 0 else 'e'), b, base + off)), dims
def T(name):  # a matrix as rows (ggml ne[0] = columns), or a vector
    v, dims = flat(name)
    if len(dims) == 1: return v
    c = dims[0]; return [v[r*c:(r+1)*c] for r in range(len(v) // c)]
has = lambda n: n in tens
g = lambda k, d=None: meta.get('clip.vision.' + k, d)
dim = g('embedding_length'); hid = g('feed_forward_length'); L = g('block_count'); H = g('attention.head_count')
eps = g('attention.layer_norm_epsilon', 1e-5); P = g('patch_size'); S0 = g('image_size')
mean = g('image_mean', [0.5] * 3); std = g('image_std', [0.5] * 3)
use_gelu = meta.get('clip.use_gelu', False)
cls_tok = has('v.class_embd'); hd = dim // H
inp = json.load(open(inpath))
S = inp.get('size') or S0
mode = inp.get('resize') or ('crop' if cls_tok else 'squash')
pooling = inp.get('pooling') or ('cls' if cls_tok else 'mean')

def cubic(x, a):
    x = abs(x)
    if x < 1: return ((a + 2) * x - (a + 3)) * x * x + 1
    if x < 2: return (((x - 5) * x + 8) * x - 4) * a
    return 0.0
def pil_weights(n_in, n_out):
    scale = n_in / n_out; fs = max(scale, 1.0); support = 2.0 * fs; out = []
    for i in range(n_out):
        c = (i + 0.5) * scale
        lo = max(0, int(c - support + 0.5)); hi = min(n_in, int(c + support + 0.5))
        w = [cubic((x - c + 0.5) / fs, -0.5) for x in range(lo, hi)]; s = sum(w)
        out.append([(x, wx / s) for x, wx in zip(range(lo, hi), w)])
    return out
def torch_weights(n_in, n_out):
    scale = n_in / n_out; out = []
    for i in range(n_out):
        src = (i + 0.5) * scale - 0.5; x0 = math.floor(src); t = src - x0
        out.append([(min(max(x0 - 1 + k, 0), n_in - 1), cubic(t + 1 - k, -0.75)) for k in range(4)])
    return out
def resize(img, sh, sw, dh, dw, weights):  # img[y][x] -> [dh][dw], columns then rows
    wx = weights(sw, dw); wy = weights(sh, dh)
    tmp = [[sum(w * img[y][x] for x, w in wx[j]) for j in range(dw)] for y in range(sh)]
    return [[sum(w * tmp[y][j] for y, w in wy[i]) for j in range(dw)] for i in range(dh)]

W, Hh, rgba = inp['width'], inp['height'], inp['rgba']
planes = [[[float(rgba[(y * W + x) * 4 + c]) for x in range(W)] for y in range(Hh)] for c in range(3)]
if mode == 'crop':
    if W <= Hh: rw, rh = S, S * Hh // W
    else: rw, rh = S * W // Hh, S
else: rw, rh = S, S
top, left = (rh - S) // 2, (rw - S) // 2
pix = []
for c in range(3):
    r = resize(planes[c], Hh, W, rh, rw, pil_weights)
    pix.append([[(r[top + y][left + x] / 255.0 - mean[c]) / std[c] for x in range(S)] for y in range(S)])

def mv(Wm, x, bias=None):
    out = [sum(w * xi for w, xi in zip(row, x)) for row in Wm]
    return [o + bb for o, bb in zip(out, bias)] if bias is not None else out
def ln(x, w, bb):
    m = sum(x) / len(x); v = sum((xi - m) ** 2 for xi in x) / len(x); s = 1.0 / math.sqrt(v + eps)
    return [(xi - m) * s * wi + (bi if bb is not None else 0.0) for xi, wi, bi in zip(x, w, bb if bb is not None else [0.0] * len(x))]
def act(x):
    if use_gelu: return 0.5 * x * (1 + math.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return x / (1 + math.exp(-1.702 * x))
opt = lambda n: T(n) if has(n) else None

# Patch embedding: the convolution kernel [P, P, 3, dim] (ggml order) applied at stride P.
kv, kdims = flat('v.patch_embd.weight')
kern = [kv[o * 3 * P * P:(o + 1) * 3 * P * P] for o in range(dim)]  # (dim, (c, y, x))
pb = opt('v.patch_embd.bias') or [0.0] * dim
gh = gw = S // P
xs = []
if cls_tok: xs.append(T('v.class_embd'))
for py in range(gh):
    for px in range(gw):
        patch = [pix[c][py * P + y][px * P + x] for c in range(3) for y in range(P) for x in range(P)]
        xs.append([v + bb for v, bb in zip(mv(kern, patch), pb)])
pos = T('v.position_embd.weight'); g0 = S0 // P; off = 1 if cls_tok else 0
if gh != g0:
    grid = pos[off:]
    chan = [resize([[grid[y * g0 + x][d] for x in range(g0)] for y in range(g0)], g0, g0, gh, gw, torch_weights) for d in range(dim)]
    pos = pos[:off] + [[chan[d][y][x] for d in range(dim)] for y in range(gh) for x in range(gw)]
xs = [[a + bb for a, bb in zip(x, pr)] for x, pr in zip(xs, pos)]
if has('v.pre_ln.weight'): xs = [ln(x, T('v.pre_ln.weight'), opt('v.pre_ln.bias')) for x in xs]
N = len(xs)
maps = []  # per layer, per head: N rows of N probabilities
for l in range(L):
    pre = 'v.blk.%d.' % l
    up, down = pre + 'ffn_up.', pre + 'ffn_down.'
    if tens[down + 'weight'][0][0] == dim and hid != dim: up, down = down, up  # legacy names: fc1 as ffn_down
    hn = [ln(x, T(pre + 'ln1.weight'), opt(pre + 'ln1.bias')) for x in xs]
    q = [mv(T(pre + 'attn_q.weight'), x, opt(pre + 'attn_q.bias')) for x in hn]
    k = [mv(T(pre + 'attn_k.weight'), x, opt(pre + 'attn_k.bias')) for x in hn]
    v = [mv(T(pre + 'attn_v.weight'), x, opt(pre + 'attn_v.bias')) for x in hn]
    att = [[0.0] * dim for _ in range(N)]
    maps.append([])
    for h in range(H):
        maps[-1].append([])
        s0 = h * hd
        for i in range(N):
            sc = [sum(q[i][s0 + d] * k[j][s0 + d] for d in range(hd)) / math.sqrt(hd) for j in range(N)]
            mx = max(sc); e = [math.exp(s - mx) for s in sc]; z = sum(e)
            maps[-1][-1].append([t / z for t in e])
            for d in range(hd): att[i][s0 + d] = sum(e[j] / z * v[j][s0 + d] for j in range(N))
    o = [mv(T(pre + 'attn_out.weight'), a, opt(pre + 'attn_out.bias')) for a in att]
    xs = [[a + bb for a, bb in zip(x, y)] for x, y in zip(xs, o)]
    hn = [ln(x, T(pre + 'ln2.weight'), opt(pre + 'ln2.bias')) for x in xs]
    f = [mv(T(down + 'weight'), [act(t) for t in mv(T(up + 'weight'), x, opt(up + 'bias'))], opt(down + 'bias')) for x in hn]
    xs = [[a + bb for a, bb in zip(x, y)] for x, y in zip(xs, f)]
if has('v.post_ln.weight'): xs = [ln(x, T('v.post_ln.weight'), opt('v.post_ln.bias')) for x in xs]
if inp.get('classify'):  # the classifier head on the model's own pooling, before any projection, then softmax
    pooled = xs[0] if cls_tok else [sum(x[d] for x in xs[off:]) / (N - off) for d in range(dim)]
    logits = mv(T('v.head.weight'), pooled, T('v.head.bias'))
    mx = max(logits); ex = [math.exp(t - mx) for t in logits]; z = sum(ex)
    print(json.dumps({'probabilities': [t / z for t in ex], 'labels': meta['clip.vision.labels']})); sys.exit(0)
if pooling == 'cls': e = xs[0]
else: e = [sum(x[d] for x in xs[off:]) / (N - off) for d in range(dim)]
if inp.get('project', True) and has('visual_projection.weight'): e = mv(T('visual_projection.weight'), e)
if inp.get('normalize', True):
    n = math.sqrt(sum(t * t for t in e)); e = [t / n for t in e]
print(json.dumps({'embedding': e, **({'attention': maps} if inp.get('attention') else {})}))
