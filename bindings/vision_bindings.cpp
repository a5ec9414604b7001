// Embind surface of image encoders (llama.cpp mmproj GGUF): ImageModel loads one from a heap
// buffer and embeds (or classifies) RGBA images that JS wrote into heap buffers (src/js/vision.js);
// decodeImage reads PNG, JPEG and binary PPM/PGM files (by content) wherever the platform has no decoder.
#include <memory>

#include "bindings_common.h"
#include "engine/embed_image.h"
#include "formats/gguf_clip.h"
#include "kernels/simd.h"
#include "model/transformer.h"

using namespace emscripten;
using namespace qkv;
using namespace qkv_js;

namespace {

class JsImageModel {
 public:
  JsImageModel(const JsBuffer& buf, int threads) {
    if (threads < 0 || threads > 256) fail(ErrorCode::BadArgument, "threads must be 0 (auto) .. 256");
    pool_ = std::make_shared<ThreadPool>(threads > 0 ? threads : ThreadPool::hardware_threads());
    ImageModelData d = load_image_model(buf.model_blob());
    pre_ = d.preprocess;
    projector_ = d.projector;
    head_ = std::move(d.head);
    model_ = std::make_unique<Transformer>(std::move(d.model), 0, pool_);
  }

  val info() const {
    const ModelConfig& c = model_->config();
    val o = val::object();
    o.set("arch", c.arch);
    o.set("imageEncoder", true);
    o.set("description", c.describe() + ", patch " + std::to_string(c.patch_size) + ", image " +
                             std::to_string(c.image_size) + (c.class_token ? ", class token" : ""));
    o.set("dim", c.dim);
    o.set("hiddenDim", c.hidden_dim);
    o.set("layers", c.n_layers);
    o.set("heads", c.n_heads);
    o.set("headDim", c.head_dim);
    o.set("patchSize", c.patch_size);
    o.set("imageSize", c.image_size);
    o.set("classToken", c.class_token);
    o.set("ffn", std::string(ffn_kind_name(c.ffn)));
    o.set("pooling", std::string(pool_kind_name(c.pooling)));
    const Tensor& proj = model_->weights().projection;
    o.set("projectionDim", proj ? (int)proj.rows : 0);
    o.set("embeddingDim", proj ? (int)proj.rows : c.dim);
    o.set("resize", std::string(resize_mode_name(pre_.mode)));
    val mean = val::array(), sd = val::array();
    for (int i = 0; i < 3; i++) {
      mean.call<void>("push", pre_.mean[i]);
      sd.call<void>("push", pre_.std[i]);
    }
    o.set("imageMean", mean);
    o.set("imageStd", sd);
    o.set("projector", projector_);
    val labels = val::array();
    for (const std::string& l : head_.labels) labels.call<void>("push", l);
    o.set("labels", labels);
    o.set("weightBytes", (double)model_->weight_bytes());
    o.set("threads", pool_->size());
    o.set("simd", std::string(simd_arch_name()));
    return o;
  }

  // rgba: a heap buffer of width * height * 4 bytes; options: {pooling, normalize, project, size,
  // resize} (checked in JS; checked again here). Returns a Float32Array.
  val embedImage(const JsBuffer& rgba, int width, int height, val options) {
    return guard([&] { return embed(rgba, width, height, options); });
  }

  // Class probabilities (softmax of the classifier head), a Float32Array in class order; options:
  // {size, resize} (checked in JS; checked again here).
  val classifyImage(const JsBuffer& rgba, int width, int height, val options) {
    return guard([&] {
      if (!head_)
        fail(ErrorCode::Unsupported, "this image encoder has no classifier head (v.head.weight, clip.vision.labels)");
      const ImagePreprocess p = preprocess(options);
      const std::vector<float> pr =
          classify_image(*model_, head_.weight, head_.bias, p, rgba.blob()->data(), rgba.blob()->size(), width, height);
      return val::global("Float32Array").new_(val(typed_memory_view(pr.size(), pr.data())));
    });
  }

  // embedImage plus the attention of every layer and head: {embedding, attention: Float32Array
  // (layers * heads * rows * rows), rows, gridHeight, gridWidth}.
  val inspectImage(const JsBuffer& rgba, int width, int height, val options) {
    return guard([&] {
      struct Capture {  // off again whatever embed() throws
        Transformer& m;
        explicit Capture(Transformer& t) : m(t) { m.set_capture_attention(true); }
        ~Capture() { m.set_capture_attention(false); }
      } capture(*model_);
      val out = val::object();
      out.set("embedding", embed(rgba, width, height, options));
      const std::vector<float>& a = model_->attention();
      out.set("attention", val::global("Float32Array").new_(val(typed_memory_view(a.size(), a.data()))));
      out.set("rows", model_->attention_queries());
      const int g = size_ / model_->config().patch_size;
      out.set("gridHeight", g);
      out.set("gridWidth", g);
      return out;
    });
  }

 private:
  // Options checked (again: JS checks them first), the image preprocessed and embedded.
  static val opt(const val& options, const char* k) {
    return options.isUndefined() || options.isNull() ? val::undefined() : options[k];
  }
  ImagePreprocess preprocess(const val& options) {
    ImagePreprocess p = pre_;
    val size = opt(options, "size");
    if (size.isNumber()) p.size = size.as<int>();
    val resize = opt(options, "resize");
    if (resize.isString()) p.mode = parse_resize_mode(resize.as<std::string>());
    size_ = p.size;
    return p;
  }
  val embed(const JsBuffer& rgba, int width, int height, val options) {
    ImageEmbedOptions o;
    auto opt = [&](const char* k) { return JsImageModel::opt(options, k); };
    val pooling = opt("pooling");
    if (pooling.isString()) {
      const std::string s = pooling.as<std::string>();
      if (s != "cls" && s != "mean") fail(ErrorCode::BadArgument, "pooling must be 'cls' or 'mean'");
      o.pooling = s == "cls" ? PoolKind::Cls : PoolKind::Mean;
    }
    if (opt("normalize").isFalse()) o.normalize = false;
    if (opt("project").isFalse()) o.project = false;
    const ImagePreprocess p = preprocess(options);
    const std::vector<float> e = embed_image(*model_, p, rgba.blob()->data(), rgba.blob()->size(), width, height, o);
    return val::global("Float32Array").new_(val(typed_memory_view(e.size(), e.data())));
  }

  std::shared_ptr<ThreadPool> pool_;
  std::unique_ptr<Transformer> model_;
  ImagePreprocess pre_;
  std::string projector_;
  ImageClassifierHead head_;
  int size_ = 0;  // the input side of the last call
};

// Whether the bytes are an image encoder GGUF (general.architecture clip): loadModel picks the class.
// A PNG, JPEG or binary PPM/PGM file -> {data: Uint8Array (RGBA), width, height}.
val js_decode_image(const JsBuffer& buf) {
  return guard([&] {
    int w = 0, h = 0;
    const std::vector<uint8_t> rgba = decode_image(buf.blob()->data(), buf.blob()->size(), &w, &h);
    val o = val::object();
    o.set("data", val::global("Uint8Array").new_(val(typed_memory_view(rgba.size(), rgba.data()))));
    o.set("width", w);
    o.set("height", h);
    return o;
  });
}

}  // namespace

EMSCRIPTEN_BINDINGS(qkv_vision) {
  function("decodeImage", &js_decode_image);
  class_<JsImageModel>("ImageModel")
      .constructor(&construct<JsImageModel, const JsBuffer&, int>, allow_raw_pointers())
      .function("info", &JsImageModel::info)
      .function("embedImage", &JsImageModel::embedImage)
      .function("inspectImage", &JsImageModel::inspectImage)
      .function("classifyImage", &JsImageModel::classifyImage);
}
