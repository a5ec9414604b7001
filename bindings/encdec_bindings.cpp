// Embind surface of encoder-decoder models (t5 GGUF): EncDecModel loads one from a heap buffer,
// encodes a source and steps the decoder one sampled token at a time for src/js/encdec.js;
// inspect() returns encoder, decoder self- and cross-attention maps for a source and target.
#include <algorithm>
#include <memory>

#include "bindings_common.h"
#include "cli/args.h"
#include "engine/encdec_generate.h"
#include "formats/gguf_encdec.h"
#include "formats/loader.h"
#include "kernels/simd.h"
#include "model/encdec.h"
#include "sampler/sampler.h"
#include "tokenizer/tokenizer.h"

using namespace emscripten;
using namespace qkv;
using namespace qkv_js;

namespace {

class JsEncDec {
 public:
  JsEncDec(const JsBuffer& buf, int threads) {
    if (threads < 0 || threads > 256) fail(ErrorCode::BadArgument, "threads must be 0 (auto) .. 256");
    pool_ = std::make_shared<ThreadPool>(threads > 0 ? threads : ThreadPool::hardware_threads());
    blob_ = buf.model_blob();
    model_ = std::make_unique<EncoderDecoder>(load_encdec_model(blob_), 0, pool_);
    tok_ = embedded_tokenizer(blob_);
    if (!tok_) fail(ErrorCode::BadModel, "the encoder-decoder model carries no tokenizer");
    if (tok_->vocab_size() != model_->config().vocab_size)
      fail(ErrorCode::BadModel, "the tokenizer has " + std::to_string(tok_->vocab_size()) + " pieces, the model " +
                                    std::to_string(model_->config().vocab_size));
  }

  val sparseMask(int q0, int n_q, int n_kv, bool causal) const {
    return guard([&] { return sparse_mask(model_->config(), q0, n_q, n_kv, causal); });
  }

  val info() const {
    const ModelConfig& c = model_->config();
    val o = val::object();
    o.set("arch", c.arch);
    o.set("encoderDecoder", true);
    o.set("description", c.describe() + ", decoder layers " + std::to_string(model_->encdec().n_dec_layers));
    o.set("dim", c.dim);
    o.set("hiddenDim", c.hidden_dim);
    o.set("layers", c.n_layers);
    o.set("encoderLayers", c.n_layers);
    o.set("decoderLayers", model_->encdec().n_dec_layers);
    o.set("heads", c.n_heads);
    o.set("kvHeads", c.n_kv_heads);
    o.set("headDim", c.head_dim);
    o.set("vocabSize", c.vocab_size);
    o.set("contextLength", c.seq_len);
    o.set("norm", std::string(norm_kind_name(c.norm)));
    o.set("positional", std::string(pos_kind_name(c.pos)));
    o.set("ffn", std::string(ffn_kind_name(c.ffn)));
    o.set("tiedClassifier", c.tied_classifier);
    o.set("weightBytes", (double)model_->weight_bytes());
    o.set("threads", pool_->size());
    o.set("simd", std::string(simd_arch_name()));
    o.set("bosId", tok_->bos_id());
    o.set("eosId", tok_->eos_id());
    o.set("eogIds", int_array(tok_->eog_ids()));
    o.set("addBos", tok_->add_bos());
    o.set("decoderStartId", model_->encdec().decoder_start_id);
    o.set("tokenizer", std::string(tok_->kind()));
    const EncDecConfig& e = model_->encdec();
    o.set("attentionKinds", attention_kind_names(e.enc_attn, c.n_layers));
    o.set("decoderAttentionKinds", attention_kind_names(e.dec_attn, e.n_dec_layers));
    o.set("crossAttentionKinds", attention_kind_names(e.cross_attn, e.n_dec_layers));
    auto any = [&](AttnKind k) {
      for (const auto* v : {&e.enc_attn, &e.dec_attn, &e.cross_attn})
        if (std::find(v->begin(), v->end(), k) != v->end()) return true;
      return false;
    };
    attention_kind_params(c, any(AttnKind::Additive), any(AttnKind::BlockSparse), o);
    o.set("chatFormat", std::string("none"));
    o.set("chatFormatGuessed", false);
    o.set("chatFallbackReason", std::string());
    return o;
  }

  // Text -> ids as the encoder takes them (EOS appended where the tokenizer asks).
  val tokenizeSource(std::string text) const {
    return guard([&] { return int_array(encdec_source_ids(*tok_, text)); });
  }
  val tokenizeSpecial(std::string text, bool bos, bool special) const {
    return guard([&] { return int_array(tok_->encode(text, bos, false, special)); });
  }
  val piece(int prev, int id) const {
    return guard([&] { return byte_array(tok_->decode(prev, id)); });
  }
  // As piece(), but control tokens (<pad>, </s>) print nothing: generated text.
  val textPiece(int prev, int id) const {
    return guard([&] { return byte_array(tok_->is_control(id) ? std::string() : tok_->decode(prev, id)); });
  }
  val detokenize(val ids_js) const {
    return guard([&] {
      std::string out;
      int prev = model_->encdec().decoder_start_id;
      for (int id : vecFromJSArray<int>(ids_js)) {
        if (id == tok_->bos_id() || id == tok_->eos_id() || tok_->is_control(id)) {
          prev = id;
          continue;
        }
        std::string p = tok_->decode(prev, id);
        if (out.empty() && !p.empty() && p[0] == ' ') p.erase(0, 1);  // SentencePiece drops the leading space
        out += p;
        prev = id;
      }
      return byte_array(out);
    });
  }

  // Encodes the source and starts a target at the decoder start token.
  void begin(val src_js, val sampler_opts) {
    guard([&] {
      const std::vector<int> src = vecFromJSArray<int>(src_js);
      if (src.empty()) fail(ErrorCode::BadArgument, "the source needs at least one token");
      sampler_ = std::make_unique<Sampler>(model_->config().vocab_size, sampler_options(sampler_opts));
      model_->encode(src.data(), (int)src.size());
      token_ = model_->encdec().decoder_start_id;
      pos_ = 0;
      seq_.clear();
      return 0;
    });
  }
  // Runs the decoder on the last token and samples the next one (which the next call feeds).
  int next() {
    return guard([&] {
      if (!sampler_) fail(ErrorCode::BadArgument, "next() before begin()");
      const int V = model_->config().vocab_size;
      const float* logits = model_->decode(&token_, 1, pos_);
      work_.assign(logits, logits + V);
      const int id = sampler_->sample(work_.data(), seq_.data(), (int)seq_.size());
      seq_.push_back(id);
      token_ = id;
      pos_++;
      return id;
    });
  }
  // The CLI's `run` (bin/qkv.mjs): argv after the command, onPiece(Uint8Array view) per piece.
  val run(val argv, val on_piece) {
    return guard([&] {
      const RunArgs a = parse_run_args(vecFromJSArray<std::string>(argv));
      EncoderDecoder m(load_encdec_model(blob_), a.context, pool_);
      RunStats st = run_encdec_generate(m, *tok_, a.run, [&](const std::string& p) {
        on_piece(val(typed_memory_view(p.size(), reinterpret_cast<const uint8_t*>(p.data()))));
      });
      val o = val::object();
      o.set("promptTokens", st.prompt_tokens);
      o.set("generatedTokens", st.generated_tokens);
      o.set("prefillMs", st.prefill_ms);
      o.set("decodeMs", st.decode_ms);
      return o;
    });
  }
  int position() const { return pos_; }
  double kvCacheBytes() const { return (double)model_->cache_bytes(); }
  int context() const { return model_->context(); }

  // Attention maps for a source and a target (ids; the decoder start token is put in front):
  // encoder (layers, heads, S, S), decoder self (decLayers, heads, T, T), cross (decLayers,
  // heads, T, S), with T = target length + 1.
  val inspect(val src_js, val tgt_js) {
    return guard([&] {
      const std::vector<int> src = vecFromJSArray<int>(src_js);
      std::vector<int> tgt = {model_->encdec().decoder_start_id};
      for (int id : vecFromJSArray<int>(tgt_js)) tgt.push_back(id);
      if (src.empty()) fail(ErrorCode::BadArgument, "inspect needs a source of at least one token");
      if ((int)tgt.size() > model_->context())
        fail(ErrorCode::BadArgument, "the target is longer than the context of " + std::to_string(model_->context()));
      sampler_.reset();  // the decoder state is replaced: a generation in progress ends here
      model_->set_capture_attention(true);
      try {
        model_->encode(src.data(), (int)src.size());
        model_->decode(tgt.data(), (int)tgt.size(), 0);
      } catch (...) {
        model_->set_capture_attention(false);
        throw;
      }
      model_->set_capture_attention(false);
      const ModelConfig& c = model_->config();
      val o = val::object();
      o.set("encoderLayers", c.n_layers);
      o.set("decoderLayers", model_->encdec().n_dec_layers);
      o.set("heads", c.n_heads);
      o.set("sourceLength", (int)src.size());
      o.set("targetLength", (int)tgt.size());
      o.set("target", int_array(tgt));
      o.set("encoder", float_array(model_->encoder_attention().data(), model_->encoder_attention().size()));
      o.set("self", float_array(model_->self_attention().data(), model_->self_attention().size()));
      o.set("cross", float_array(model_->cross_attention().data(), model_->cross_attention().size()));
      return o;
    });
  }

 private:
  std::shared_ptr<ThreadPool> pool_;
  std::shared_ptr<const Blob> blob_;  // the model's bytes (the weights are views into them)
  std::unique_ptr<EncoderDecoder> model_;
  std::unique_ptr<Tokenizer> tok_;
  std::unique_ptr<Sampler> sampler_;
  std::vector<int> seq_;
  std::vector<float> work_;
  int token_ = 0, pos_ = 0;
};

// Whether the bytes are an encoder-decoder GGUF (loadModel picks the class with it).
}  // namespace

EMSCRIPTEN_BINDINGS(qkv_encdec) {
  class_<JsEncDec>("EncDecModel")
      .constructor(&construct<JsEncDec, const JsBuffer&, int>, allow_raw_pointers())
      .function("info", &JsEncDec::info)
      .function("sparseMask", &JsEncDec::sparseMask)
      .function("tokenizeSource", &JsEncDec::tokenizeSource)
      .function("tokenizeSpecial", &JsEncDec::tokenizeSpecial)
      .function("piece", &JsEncDec::piece)
      .function("textPiece", &JsEncDec::textPiece)
      .function("detokenize", &JsEncDec::detokenize)
      .function("begin", &JsEncDec::begin)
      .function("next", &JsEncDec::next)
      .function("run", &JsEncDec::run)
      .function("position", &JsEncDec::position)
      .function("kvCacheBytes", &JsEncDec::kvCacheBytes)
      .function("context", &JsEncDec::context)
      .function("inspect", &JsEncDec::inspect);
}
