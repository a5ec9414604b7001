// The CLIs' shared C++ (src/cli/): flag parsing, `info` / `tokenize`, the re-quantize guard, and
// what `run --chat -n N` generates. The binaries themselves are driven by tests/js/cli.test.mjs.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/inspect.h"
#include "cli/quantize_cmd.h"
#include "common.h"
#include "engine/generate.h"
#include "formats/file.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "formats/loader.h"
#include "formats/quantize.h"
#include "model/transformer.h"
#include "threadpool.h"
#include "tokenizer/tokenizer.h"
#include "test_models.h"

using namespace qkv;

namespace {

std::string error_of(const std::function<void()>& f, ErrorCode* code = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (code) *code = e.code();
    return e.what();
  }
  return "";
}

std::shared_ptr<const Blob> blob(std::vector<uint8_t> v) { return std::make_shared<VectorBlob>(std::move(v)); }

const char* kChatml =
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

std::shared_ptr<const Blob> test_model(const std::string& chat_template) {
  TestModelSpec s;
  s.chat_template = chat_template;
  s.context = 256;
  return blob(write_test_model(s));
}

RunStats run(const std::shared_ptr<const Blob>& b, RunOptions o) {
  Transformer t(load_model(b), 0, std::make_shared<ThreadPool>(1));
  std::unique_ptr<Tokenizer> tok = embedded_tokenizer(b);
  o.sampler.temperature = 0;
  return run_generate(t, *tok, o, [](const std::string&) {});
}

}  // namespace

TEST(CliArgs, UnknownFlagIsNamedNotAskedForAValue) {
  ErrorCode code{};
  const std::string m = error_of([] { parse_run_args({"m.gguf", "--frob"}); }, &code);
  EXPECT_EQ(code, ErrorCode::BadArgument);
  EXPECT_NE(m.find("unknown option --frob"), std::string::npos) << m;
  EXPECT_EQ(m.find("needs a value"), std::string::npos) << m;
  EXPECT_EQ(m.find("did you mean"), std::string::npos) << m;  // nothing is close to --frob
}

TEST(CliArgs, DidYouMeanForCloseSpellings) {
  EXPECT_NE(error_of([] {
              parse_run_args({"m.gguf", "--thread", "2"});
            }).find("did you mean --threads?"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_run_args({"m.gguf", "--chatt", "hi"});
            }).find("did you mean --chat?"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              parse_run_args({"m.gguf", "--allow-requantise"});
            }).find("did you mean --allow-requantize?"),
            std::string::npos);
  EXPECT_EQ(unknown_option_message("-x", {"-z", "-i"}), "unknown option -x");  // one letter: never "close"
}

TEST(CliArgs, AllowRequantizeIsASwitch) {
  RunArgs a = parse_run_args({"m.gguf", "--allow-requantize", "--type", "q4_0"});
  EXPECT_TRUE(a.allow_requantize);
  EXPECT_EQ(a.weight_type, "q4_0");
  EXPECT_FALSE(parse_run_args({"m.gguf"}).allow_requantize);
}

TEST(CliArgs, QuantizeTypesListedAreTheAcceptedOnes) {
  std::string names = qtype_names();
  int n = 0;
  for (size_t p = 0, q; p <= names.size(); p = q + 1) {
    q = names.find('|', p);
    if (q == std::string::npos) q = names.size();
    const std::string t = names.substr(p, q - p);
    EXPECT_NO_THROW(parse_qtype(t)) << t;
    n++;
  }
  EXPECT_EQ(n, 10);
  const std::string m = error_of([] { parse_quantize_args({"in.gguf", "out.gguf"}); });
  EXPECT_NE(m.find(names), std::string::npos) << m;
}

TEST(CliChat, MinusNCountsReplyTokens) {
  auto b = test_model(kChatml);
  RunOptions o;
  o.chat = true;
  o.prompt = "Hello there, how are you doing today? Tell me about the weather in the mountains.";
  o.steps = 5;
  RunStats st = run(b, o);
  ASSERT_GT(st.prompt_tokens, 5);  // the case that printed nothing: -n below the rendered prompt
  EXPECT_GE(st.generated_tokens, 1);
  EXPECT_LE(st.generated_tokens, 5);
  for (const std::string& n : st.notes) EXPECT_EQ(n.find("chat template"), std::string::npos) << n;
}

TEST(CliChat, NoTemplateWarnsAndNothingGeneratedIsExplained) {
  auto b = test_model("");
  RunOptions o;
  o.chat = true;
  o.prompt = "Hello";
  o.steps = 3;
  RunStats st = run(b, o);
  ASSERT_FALSE(st.notes.empty());
  EXPECT_NE(st.notes[0].find("no chat template"), std::string::npos) << st.notes[0];
  // Plain run: -n counts the prompt (run.c), so a short -n generates nothing, and says why.
  RunOptions p;
  p.prompt = "the quick brown fox jumps over the lazy dog";
  p.steps = 2;
  RunStats s2 = run(b, p);
  EXPECT_EQ(s2.generated_tokens, 0);
  ASSERT_EQ(s2.notes.size(), 1u);
  EXPECT_NE(s2.notes[0].find("nothing was generated"), std::string::npos) << s2.notes[0];
  EXPECT_NE(s2.notes[0].find("-n 2"), std::string::npos) << s2.notes[0];
}

TEST(CliInspect, InfoAndTokenize) {
  auto b = test_model(kChatml);
  const std::string info = model_info_json(b, nullptr);
  EXPECT_NE(info.find("\"format\": \"gguf\""), std::string::npos) << info;
  EXPECT_NE(info.find("\"arch\": \"llama\""), std::string::npos) << info;
  EXPECT_NE(info.find("\"dim\": 64"), std::string::npos) << info;
  EXPECT_NE(info.find("\"chatFormatGuessed\": false"), std::string::npos) << info;
  // Each line: the id and its piece; the ids are the tokenizer's own encoding.
  std::unique_ptr<Tokenizer> tok = embedded_tokenizer(b);
  const std::vector<int> ids = tok->encode("hello \"world\"\n", true, false);
  const std::string lines = tokenize_lines(b, nullptr, "hello \"world\"\n");
  size_t pos = 0;
  for (int id : ids) {
    const size_t eol = lines.find('\n', pos);
    ASSERT_NE(eol, std::string::npos);
    const std::string line = lines.substr(pos, eol - pos);
    EXPECT_EQ(line.substr(0, line.find('\t')), std::to_string(id)) << line;
    pos = eol + 1;
  }
  EXPECT_EQ(pos, lines.size());
  EXPECT_NE(lines.find("\\\""), std::string::npos) << "quotes in a piece are escaped: " << lines;
}

TEST(CliInspect, ArgumentErrors) {
  EXPECT_NE(error_of([] { parse_inspect_args("tokenize", {"m.gguf"}); }).find("missing TEXT"), std::string::npos);
  EXPECT_NE(error_of([] { parse_inspect_args("info", {}); }).find("missing MODEL"), std::string::npos);
  EXPECT_NE(error_of([] {
              parse_inspect_args("info", {"m.gguf", "--frob"});
            }).find("unknown option --frob"),
            std::string::npos);
  EXPECT_EQ(parse_inspect_args("tokenize", {"m.gguf", "--", "-n"}).text, "-n");
  EXPECT_EQ(parse_inspect_args("info", {"m.bin", "-z", "t.bin"}).tokenizer_path, "t.bin");
}

TEST(CliQuantize, RequantizeIsRefusedUnlessAllowed) {
  auto f32 = test_model("");
  std::vector<uint8_t> q8 = quantize_gguf(GgufFile::parse(f32), QType::Q8_0).bytes;
  const GgufFile g = GgufFile::parse(blob(q8));
  ErrorCode code{};
  const std::string m = error_of([&] { check_requantize(g, QType::Q4_0, false); }, &code);
  EXPECT_EQ(code, ErrorCode::BadArgument);
  EXPECT_NE(m.find("already quantized"), std::string::npos) << m;
  EXPECT_NE(m.find("Q8_0"), std::string::npos) << m;
  EXPECT_NE(m.find("--allow-requantize"), std::string::npos) << m;
  EXPECT_NO_THROW(check_requantize(g, QType::Q4_0, true));
  EXPECT_NO_THROW(check_requantize(g, QType::F32, false));  // widening loses nothing
  EXPECT_NO_THROW(check_requantize(GgufFile::parse(f32), QType::Q4_0, false));
}

TEST(CliMessages, EncoderDecoderRefusalNamesNoInternalFunction) {
  std::shared_ptr<const Blob> tb = map_file(std::string(QKV_SHARED_DIR) + "/models/aidreams-tok512.bin");
  Tokenizer spm = Tokenizer::from_llama2c(tb->data(), tb->size(), 512);
  TestModelSpec s;
  s.arch = "t5";
  s.spm = &spm;
  ErrorCode code{};
  const std::string m = error_of([&] { load_model(blob(write_test_encdec_model(s))); }, &code);
  EXPECT_EQ(code, ErrorCode::Unsupported);
  EXPECT_NE(m.find("encoder-decoder"), std::string::npos) << m;
  EXPECT_EQ(m.find("load_encdec_model"), std::string::npos) << m;
  EXPECT_EQ(m.find("yet"), std::string::npos) << m;
}
