// Hugging Face checkpoints: the same random model written as GGUF and as config.json +
// tokenizer.json + safetensors (one file or sharded; F32, F16, BF16) must load as the same model
// (bit-identical logits, the same greedy tokens and token ids); the real vocabularies in
// ../shared/vocab written as tokenizer.json must give Hugging Face's ids; hostile safetensors
// headers and configs get typed errors naming the problem.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "engine/embed.h"
#include "formats/file.h"
#include "formats/gguf.h"
#include "formats/gguf_model.h"
#include "formats/gguf_writer.h"
#include "formats/hf.h"
#include "hf_test_models.h"
#include "real_vocab.h"
#include "test_models.h"
#include "formats/loader.h"
#include "formats/quantize.h"
#include "formats/safetensors.h"
#include "model/transformer.h"
#include "tokenizer/tokenizer.h"

using namespace qkv;

namespace {

std::shared_ptr<const Blob> hf_blob(const HfFileList& files) {
  std::vector<std::pair<std::string, std::shared_ptr<const Blob>>> v;
  for (const auto& f : files) v.emplace_back(f.first, std::make_shared<VectorBlob>(f.second));
  return std::make_shared<HfFiles>(std::move(v));
}
std::shared_ptr<const Blob> vec_blob(std::vector<uint8_t> b) { return std::make_shared<VectorBlob>(std::move(b)); }

std::vector<float> logits_of(const std::shared_ptr<const Blob>& blob, const std::vector<int>& ids,
                             std::vector<int>* greedy) {
  Transformer t(load_model(blob), 64, nullptr);
  const int vocab = t.config().vocab_size;
  const float* l = t.forward(ids.data(), (int)ids.size(), 0);
  std::vector<float> out(l, l + vocab);
  int pos = (int)ids.size();
  for (int step = 0; step < 8; step++) {
    int best = 0;
    for (int i = 1; i < vocab; i++)
      if (l[i] > l[best]) best = i;
    greedy->push_back(best);
    l = t.forward(&best, 1, pos++);
  }
  return out;
}

struct Case {
  const char* arch;
  QType dtype;
  int shards;
};

class HfModel : public ::testing::TestWithParam<Case> {};

TEST_P(HfModel, LoadsAsItsGgufConversion) {
  const Case c = GetParam();
  TestModelSpec spec;
  spec.arch = c.arch;
  spec.tied = std::string(c.arch) != "qwen2";  // one family with its own classifier (lm_head)
  const GgufFile src = GgufFile::parse(vec_blob(write_test_model(spec)));
  std::vector<uint8_t> gguf;
  const HfFileList files = write_hf_checkpoint(src, c.dtype, c.shards, &gguf);
  const auto g = vec_blob(gguf), h = hf_blob(files);
  const std::unique_ptr<Tokenizer> tg = embedded_tokenizer(g), th = embedded_tokenizer(h);
  ASSERT_TRUE(tg && th);
  const std::string text = "Hello world, the quick brown fox 123 jumps.";
  const std::vector<int> ids = tg->encode(text, true, false);
  ASSERT_EQ(th->encode(text, true, false), ids);
  EXPECT_EQ(th->bos_id(), tg->bos_id());
  EXPECT_EQ(th->eos_id(), tg->eos_id());
  if (std::string(c.arch) == "bert") {
    Transformer mg(load_model(g), 64, nullptr), mh(load_model(h), 64, nullptr);
    const std::vector<float> eg = embed_ids(mg, {ids}, EmbedOptions()), eh = embed_ids(mh, {ids}, EmbedOptions());
    ASSERT_EQ(eg.size(), eh.size());
    for (size_t i = 0; i < eg.size(); i++) ASSERT_EQ(eg[i], eh[i]) << i;
    return;
  }
  std::vector<int> greedy_g, greedy_h;
  const std::vector<float> lg = logits_of(g, ids, &greedy_g), lh = logits_of(h, ids, &greedy_h);
  ASSERT_EQ(lg.size(), lh.size());
  for (size_t i = 0; i < lg.size(); i++) ASSERT_EQ(lg[i], lh[i]) << "logit " << i;
  EXPECT_EQ(greedy_g, greedy_h);
  // The checkpoint's matrices are used where they lie (no copy) but for Llama's permuted q/k.
  const GgufFile hv = GgufFile::parse(h);
  const Blob* st = as_hf_files(h.get())->find(c.shards > 1 ? "model-00001-of-00002.safetensors" : "model.safetensors");
  ASSERT_TRUE(st);
  const uint8_t* p = hv.tensor_data(*hv.find_tensor("blk.0.ffn_down.weight"));
  bool inside = false;
  for (const auto& f : as_hf_files(h.get())->files())
    inside = inside || (p >= f.second->data() && p < f.second->data() + f.second->size());
  EXPECT_TRUE(inside) << "ffn_down was copied";
}

INSTANTIATE_TEST_SUITE_P(
    Families, HfModel,
    ::testing::Values(Case{"llama", QType::F32, 1}, Case{"llama", QType::BF16, 2}, Case{"qwen2", QType::F16, 1},
                      Case{"qwen3", QType::BF16, 1}, Case{"gemma", QType::F32, 1}, Case{"gemma2", QType::F16, 2},
                      Case{"gemma3", QType::BF16, 1}, Case{"bert", QType::F32, 1}, Case{"bert", QType::F16, 2}),
    [](const ::testing::TestParamInfo<Case>& i) {
      return std::string(i.param.arch) + "_" + qtype_name(i.param.dtype) + "_" + std::to_string(i.param.shards);
    });

TEST(HfModel, QuantizeWritesTheGgufConversion) {
  TestModelSpec spec;
  spec.arch = "llama";
  const GgufFile src = GgufFile::parse(vec_blob(write_test_model(spec)));
  std::vector<uint8_t> gguf;
  const auto h = hf_blob(write_hf_checkpoint(src, QType::F16, 1, &gguf));
  // F16 -> F16 re-encodes exactly: the GGUF `qkv quantize` writes from the checkpoint is its conversion.
  const QuantizeResult a = quantize_gguf(GgufFile::parse(h), QType::F16),
                       b = quantize_gguf(GgufFile::parse(vec_blob(gguf)), QType::F16);
  std::vector<int> ga, gb;
  const std::vector<int> ids = {1, 5, 9, 3};
  EXPECT_EQ(logits_of(vec_blob(a.bytes), ids, &ga), logits_of(vec_blob(b.bytes), ids, &gb));
  EXPECT_EQ(ga, gb);
}

TEST(HfModel, ADirectoryIsAModel) {
  TestModelSpec spec;
  spec.arch = "qwen3";
  const GgufFile src = GgufFile::parse(vec_blob(write_test_model(spec)));
  std::vector<uint8_t> gguf;
  const HfFileList files = write_hf_checkpoint(src, QType::BF16, 2, &gguf);
  char tmpl[] = "/tmp/qkv_hf_XXXXXX";
  ASSERT_TRUE(mkdtemp(tmpl));
  const std::string dir = tmpl;
  for (const auto& f : files) {
    std::ofstream o(dir + "/" + f.first, std::ios::binary);
    o.write(reinterpret_cast<const char*>(f.second.data()), (std::streamsize)f.second.size());
  }
  std::ofstream(dir + "/README.md") << "not read";
  std::vector<int> ga, gb;
  const std::vector<int> ids = {1, 7, 2, 9};
  EXPECT_EQ(logits_of(map_model_file(dir), ids, &ga), logits_of(vec_blob(gguf), ids, &gb));
  EXPECT_EQ(ga, gb);
  EXPECT_TRUE(embedded_tokenizer(map_model_file(dir)));
  for (const auto& f : files) unlink((dir + "/" + f.first).c_str());
  unlink((dir + "/README.md").c_str());
  try {
    map_model_file(dir);
    FAIL() << "an empty directory loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Io);
    EXPECT_NE(std::string(e.what()).find("without config.json"), std::string::npos) << e.what();
  }
  rmdir(dir.c_str());
}

// ---- real vocabularies as tokenizer.json ----------------------------------------------------

class HfRealVocab : public ::testing::TestWithParam<const char*> {};

TEST_P(HfRealVocab, TokenizerJsonGivesHuggingFaceIds) {
  VocabCases v;
  if (!read_real_vocab(GetParam(), &v)) GTEST_SKIP() << GetParam() << " is missing from " << kVocabDir;
  const GgufFile g = GgufFile::parse(vec_blob(std::vector<uint8_t>(v.gguf.begin(), v.gguf.end())));
  const auto files = hf_blob(write_hf_tokenizer(g, false));
  GgufWriter w;
  add_hf_tokenizer(w, *as_hf_files(files.get()));
  const Tokenizer t = load_gguf_tokenizer(GgufFile::parse(vec_blob(w.finish())));
  ASSERT_EQ(v.texts.size(), 46u);
  ASSERT_EQ(v.expected.size(), v.texts.size());
  for (size_t i = 0; i < v.texts.size(); i++)
    EXPECT_EQ(t.encode(v.texts[i], false, false, false), v.expected[i])
        << GetParam() << " string " << i << ": '" << v.texts[i] << "'";
}

INSTANTIATE_TEST_SUITE_P(Shared, HfRealVocab, ::testing::ValuesIn(kRealVocabs),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           std::string n = i.param;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

TEST(HfTokenizer, UnigramAsTokenizerJson) {
  const auto tb = map_file(std::string(QKV_SHARED_DIR) + "/models/aidreams-tok512.bin");
  const Tokenizer spm = Tokenizer::from_llama2c(tb->data(), tb->size(), 512);
  TestModelSpec s;
  s.arch = "t5";
  s.spm = &spm;
  s.layers = 1;
  const GgufFile g = GgufFile::parse(vec_blob(write_test_encdec_model(s)));
  const Tokenizer ref = load_gguf_tokenizer(g);
  ASSERT_TRUE(ref.is_unigram());
  const auto files = hf_blob(write_hf_tokenizer(g, false));
  GgufWriter w;
  add_hf_tokenizer(w, *as_hf_files(files.get()));
  const Tokenizer t = load_gguf_tokenizer(GgufFile::parse(vec_blob(w.finish())));
  ASSERT_TRUE(t.is_unigram());
  for (const char* text :
       {"Once upon a time", "  two  spaces and\ttabs\n", "", "unknown \xE2\x82\xAC sign", "Tom's 123"}) {
    EXPECT_EQ(t.encode(text, true, true), ref.encode(text, true, true)) << text;
    EXPECT_EQ(t.encode(text, false, false), ref.encode(text, false, false)) << text;
  }
}

// ---- hostile input ---------------------------------------------------------------------------

std::vector<uint8_t> raw_safetensors(const std::string& header, size_t data_bytes) {
  std::vector<uint8_t> out(8);
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  out.insert(out.end(), header.begin(), header.end());
  out.resize(out.size() + data_bytes);
  return out;
}

void expect_error(const std::vector<uint8_t>& st, ErrorCode code, const std::string& says) {
  try {
    parse_safetensors(VectorBlob(st), "model.safetensors");
    FAIL() << "accepted; expected: " << says;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

TEST(Safetensors, HostileHeadersAreNamedErrors) {
  const std::string ok = R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";
  EXPECT_EQ(parse_safetensors(VectorBlob(raw_safetensors(ok, 16)), "x").size(), 1u);
  expect_error({1, 2, 3}, ErrorCode::BadModel, "truncated");
  std::vector<uint8_t> huge = raw_safetensors(ok, 16);
  huge[7] = 0x7f;  // a header length past the file
  expect_error(huge, ErrorCode::BadModel, "header says it is");
  expect_error(raw_safetensors(R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]})", 16), ErrorCode::BadModel,
               "invalid JSON");
  expect_error(raw_safetensors(ok, 8), ErrorCode::BadModel, "outside");
  expect_error(raw_safetensors(R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,16]}})", 16), ErrorCode::BadModel,
               "need 24");
  // A dtype qkv does not run is listed (BERT's I64 position_ids are skipped, not used); one the format lacks is
  // refused.
  EXPECT_FALSE(
      parse_safetensors(VectorBlob(raw_safetensors(R"({"a":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})", 16)),
                        "x")[0]
          .supported);
  expect_error(raw_safetensors(R"({"a":{"dtype":"C64","shape":[2],"data_offsets":[0,16]}})", 16),
               ErrorCode::Unsupported, "C64");
  expect_error(
      raw_safetensors(
          R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
          12),
      ErrorCode::BadModel, "overlap");
  expect_error(raw_safetensors(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8), ErrorCode::BadModel,
               "non-negative");
  expect_error(raw_safetensors(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8),
               ErrorCode::BadModel, "too large");
  expect_error(raw_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8), ErrorCode::BadModel,
               "outside");
  expect_error(raw_safetensors(R"([1,2])", 0), ErrorCode::BadModel, "not a JSON object");
}

TEST(HfModel, BadCheckpointsAreNamedErrors) {
  TestModelSpec spec;
  const GgufFile src = GgufFile::parse(vec_blob(write_test_model(spec)));
  HfFileList files = write_hf_checkpoint(src, QType::F32, 2);
  auto without = [&](const std::string& name) {
    HfFileList f;
    for (const auto& x : files)
      if (x.first != name) f.push_back(x);
    return f;
  };
  auto expect = [&](const HfFileList& f, ErrorCode code, const std::string& says) {
    try {
      load_model(hf_blob(f));
      FAIL() << "loaded; expected: " << says;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  expect(without("model-00002-of-00002.safetensors"), ErrorCode::Io, "model-00002-of-00002.safetensors is missing");
  expect(without("config.json"), ErrorCode::BadModel, "config.json is missing");
  expect(without("tokenizer.json"), ErrorCode::BadTokenizer, "tokenizer.json is missing");
  HfFileList bad_type = files;
  bad_type[0].second =
      std::vector<uint8_t>({'{', '"', 'm', 'o', 'd', 'e', 'l', '_', 't', 'y', 'p', 'e', '"', ':', '"', 'x', '"', '}'});
  expect(bad_type, ErrorCode::Unsupported, "model_type 'x'");
  HfFileList moved = files;  // the index names a shard that does not hold the tensor
  for (auto& f : moved)
    if (f.first == "model.safetensors.index.json") {
      std::string s(f.second.begin(), f.second.end());
      const size_t p = s.find("00002-of");
      s.replace(p, 5, "00001");
      f.second.assign(s.begin(), s.end());
    }
  expect(moved, ErrorCode::BadModel, "does not hold it");
  // A tensor the family does not have is refused, not ignored: a bias (Llama's attention_bias).
  HfFileList one = write_hf_checkpoint(src, QType::F32, 1);
  for (auto& f : one)
    if (f.first == "model.safetensors") {
      std::vector<HfTensor> ts;
      for (const SafetensorsTensor& t : parse_safetensors(VectorBlob(f.second), "x"))
        ts.push_back({t.name, t.shape, t.type, std::vector<uint8_t>(t.data, t.data + t.bytes)});
      ts.push_back({"model.layers.0.self_attn.q_proj.bias", {64}, QType::F32, std::vector<uint8_t>(256)});
      f.second = write_safetensors(ts);
    }
  expect(one, ErrorCode::Unsupported, "q_proj.bias");
}

}  // namespace
