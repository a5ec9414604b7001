// The tile logic every ISA shares: a product cut into decode and prefill register tiles.
#pragma once
// The including file defines tile<D, NR, NT, XB>(rows, xs, nb, out) first (row r . token t
// into out[r * NT + t]).
#include <cstddef>
#include <cstdint>

namespace qkv {
namespace qdot_detail {
namespace {

// The tile kinds the drivers below run: Tl::run<NR, NT>(rows, xs, out) puts row r . token t
// in out[r * NT + t].
template <class D, class XB>
struct BlockTile {  // 32-blocks (BlockQ8A, or BlockQ8S for relaxed Q8_0 decode)
  int nb;
  template <int NR, int NT>
  void run(const uint8_t* const* rows, const XB* const* xs, float* out) const {
    tile<D, NR, NT, XB>(rows, xs, nb, out);
  }
};

// Decode: NR rows at a time share each activation load; the rows come from NR equal parts of
// the range, so the weight streams are far apart (adjacent rows read in lockstep defeat the
// hardware prefetcher: 3x slower from DRAM for Q8_0). The rest go one at a time.
template <int NR, class XB, class Tl>
void decode_tiles(const Tl& tl, float* Y, const XB* X, const uint8_t* W, size_t rb, int r0, int r1) {
  float out[NR];
  const int h = (r1 - r0) / NR;
  for (int i = 0; i < h; i++) {
    const uint8_t* rows[NR];
    for (int k = 0; k < NR; k++) rows[k] = W + (size_t)(r0 + k * h + i) * rb;
    tl.template run<NR, 1>(rows, &X, out);
    for (int k = 0; k < NR; k++) Y[r0 + k * h + i] = out[k];
  }
  for (int r = r0 + NR * h; r < r1; r++) {
    const uint8_t* rows[1] = {W + (size_t)r * rb};
    tl.template run<1, 1>(rows, &X, out);
    Y[r] = out[0];
  }
}

// Prefill: 2 rows x 4 tokens per tile (token t's activations at X + t * per_token); a short
// last group repeats its last token.
template <class XB, class Tl>
void prefill_tiles(const Tl& tl, float* Y, int64_t ldy, const XB* X, size_t per_token, const uint8_t* W, size_t rb,
                   int T, int r0, int r1) {
  constexpr int NT = 4;
  float out[2 * NT];
  for (int r = r0; r < r1; r += 2) {
    const int nr = r1 - r < 2 ? 1 : 2;
    const uint8_t* rows[2] = {W + (size_t)r * rb, W + (size_t)(r + nr - 1) * rb};
    for (int t = 0; t < T; t += NT) {
      const XB* xs[NT];
      for (int i = 0; i < NT; i++) xs[i] = X + (size_t)(t + i < T ? t + i : T - 1) * per_token;
      if (nr == 2) tl.template run<2, NT>(rows, xs, out);
      else tl.template run<1, NT>(rows, xs, out);
      for (int i = 0; i < NT && t + i < T; i++)
        for (int k = 0; k < nr; k++) Y[(t + i) * ldy + r + k] = out[k * NT + i];
    }
  }
}

}  // namespace
}  // namespace qdot_detail
}  // namespace qkv
