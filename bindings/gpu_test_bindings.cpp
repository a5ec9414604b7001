// Test-only Embind surface for the WebGPU weight-product tests (tests/js/webgpu_products.test.mjs):
// the C++ quantizers and row decoders are the reference the WGSL kernels are checked against.
#include <emscripten/bind.h>
#include <emscripten/val.h>

#include <cstring>
#include <string>
#include <vector>

#include "bindings_common.h"
#include "common.h"
#include "formats/gguf_writer.h"
#include "kernels/quant.h"

using namespace emscripten;
using namespace qkv;
using qkv_js::guard;

namespace {

// Every stored type the GPU products read (parse_qtype of gguf_writer lacks q6_k).
QType gpu_test_type(const std::string& s) {
  static const std::pair<const char*, QType> kTypes[] = {
      {"f32", QType::F32},   {"f16", QType::F16},   {"bf16", QType::BF16}, {"q8_0", QType::Q8_0},
      {"q4_0", QType::Q4_0}, {"q4_1", QType::Q4_1}, {"q5_0", QType::Q5_0}, {"q5_1", QType::Q5_1},
      {"q4_k", QType::Q4_K}, {"q5_k", QType::Q5_K}, {"q6_k", QType::Q6_K}};
  for (const auto& [name, t] : kTypes)
    if (s == name) return t;
  fail(ErrorCode::BadArgument, "unknown weight type '" + s + "'");
}

void check_shape(QType t, int rows, int cols) {
  if (rows < 0 || cols <= 0 || cols % qtype_block(t) != 0)
    fail(ErrorCode::BadArgument, "rows of " + std::to_string(cols) + " do not split into blocks");
}

// rows x cols f32 values (Float32Array) -> the rows stored as `type` (Uint8Array), by the
// writer's encoders (encode_row: the reference quantizers; f32, f16, bf16 stored directly).
val gpu_test_quantize(std::string type, val values, int rows, int cols) {
  return guard([&] {
    const QType t = gpu_test_type(type);
    check_shape(t, rows, cols);
    const std::vector<float> x = convertJSArrayToNumberVector<float>(values);
    if (x.size() != (size_t)rows * cols) fail(ErrorCode::BadArgument, "values must hold rows * cols floats");
    const size_t rb = qtype_row_bytes(t, cols);
    std::vector<uint8_t> out(rb * rows);
    for (int r = 0; r < rows; r++) encode_row(t, x.data() + (size_t)r * cols, out.data() + rb * r, cols);
    return val::global("Uint8Array").new_(typed_memory_view(out.size(), out.data()));
  });
}

// Stored rows (Uint8Array, rows x row_bytes) -> their f32 values by dequantize_row_ref.
val gpu_test_dequantize(std::string type, val bytes, int rows, int cols) {
  return guard([&] {
    const QType t = gpu_test_type(type);
    check_shape(t, rows, cols);
    const std::vector<uint8_t> b = convertJSArrayToNumberVector<uint8_t>(bytes);
    const size_t rb = qtype_row_bytes(t, cols);
    if (b.size() != rb * rows) fail(ErrorCode::BadArgument, "bytes must hold rows * row_bytes");
    std::vector<float> out((size_t)rows * cols);
    for (int r = 0; r < rows; r++) dequantize_row_ref(t, b.data() + rb * r, out.data() + (size_t)r * cols, cols);
    return val::global("Float32Array").new_(typed_memory_view(out.size(), out.data()));
  });
}

// Bytes of one stored row of `cols` values.
double gpu_test_row_bytes(std::string type, int cols) {
  return guard([&] {
    const QType t = gpu_test_type(type);
    check_shape(t, 1, cols);
    return (double)qtype_row_bytes(t, cols);
  });
}

}  // namespace

EMSCRIPTEN_BINDINGS(qkv_gpu_test) {
  function("gpuTestQuantize", &gpu_test_quantize);
  function("gpuTestDequantize", &gpu_test_dequantize);
  function("gpuTestRowBytes", &gpu_test_row_bytes);
}
