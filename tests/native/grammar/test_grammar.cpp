// Grammar engine: GBNF constructs accept and reject the strings they should, errors carry line
// and column, token masks equal a brute-force check of every token, JSON Schema conversion.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/vocab.h"

using namespace qkv;

namespace {

// A vocabulary of every single byte (ids 0..255) plus an end-of-generation id 256.
std::shared_ptr<TokenTrie> byte_vocab() {
  std::vector<std::string> t;
  for (int b = 0; b < 256; b++) t.push_back(std::string(1, (char)b));
  t.push_back("");
  return std::make_shared<TokenTrie>(t, std::vector<int>{256});
}

GrammarMatcher matcher(const std::string& gbnf) {
  static auto vocab = byte_vocab();
  return GrammarMatcher(std::make_shared<Grammar>(Grammar::parse(gbnf)), vocab);
}

void expect_lang(const std::string& gbnf, std::vector<std::string> yes, std::vector<std::string> no) {
  GrammarMatcher m = matcher(gbnf);
  for (const auto& s : yes) EXPECT_TRUE(m.matches(s)) << gbnf << " should accept '" << s << "'";
  for (const auto& s : no) EXPECT_FALSE(m.matches(s)) << gbnf << " should reject '" << s << "'";
}

std::string error_of(const std::string& gbnf) {
  try {
    Grammar::parse(gbnf);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::BadArgument);
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(Grammar, Literals) {
  expect_lang("root ::= \"abc\"", {"abc"}, {"", "ab", "abcd", "abd"});
  expect_lang("root ::= \"a\\\"b\\\\c\\n\\t\\x41\\u00e9\"", {"a\"b\\c\n\tA\xc3\xa9"}, {"a\"b\\c\n\tA"});
  expect_lang("root ::= \"h\xc3\xa9\"", {"h\xc3\xa9"}, {"he", "h\xc3"});
}

TEST(Grammar, AlternativesSequencesGroups) {
  expect_lang("root ::= \"a\" | \"bc\" | \"\"", {"a", "bc", ""}, {"b", "abc", "c"});
  expect_lang("root ::= \"x\" (\"a\" | \"b\") \"y\"", {"xay", "xby"}, {"xy", "xaby"});
  expect_lang("root ::= ab ab\nab ::= \"a\" \"b\"", {"abab"}, {"ab", "aabb"});
  // A rule's alternatives may continue on the next lines; a new definition ends them.
  expect_lang("root ::= \"a\"\n  | \"b\"\n# comment\nother ::= \"c\"", {"a", "b"}, {"c"});
}

TEST(Grammar, Repetition) {
  expect_lang("root ::= \"a\"*", {"", "a", "aaaa"}, {"b", "ab"});
  expect_lang("root ::= \"a\"+", {"a", "aaa"}, {""});
  expect_lang("root ::= \"a\"? \"b\"", {"b", "ab"}, {"aab", "a"});
  expect_lang("root ::= \"ab\"{2}", {"abab"}, {"ab", "ababab"});
  expect_lang("root ::= [0-9]{2,}", {"12", "123456"}, {"1", ""});
  expect_lang("root ::= [0-9]{1,3}", {"1", "12", "123"}, {"", "1234"});
  expect_lang("root ::= (\"a\" | \"b\"){0,2} \"c\"", {"c", "ac", "bac"}, {"abac"});
  expect_lang("root ::= (\"x\" [0-9]*)+", {"x", "x12x", "xx3"}, {"", "1"});
}

TEST(Grammar, CharacterClasses) {
  expect_lang("root ::= [a-cx]", {"a", "b", "c", "x"}, {"d", "", "ab"});
  expect_lang("root ::= [^a-c\\n]", {"d", "\xc3\xa9", "\xf0\x9f\x98\x80"}, {"a", "\n"});
  expect_lang("root ::= [\\]\\-\\^]+", {"]", "-^]"}, {"a"});
  expect_lang("root ::= .", {"a", "\xe2\x82\xac"}, {"", "ab", std::string(1, '\0')});
  // Only valid UTF-8: no overlong forms ('{' as E0 81 BB), surrogates, or bytes past U+10FFFF.
  expect_lang("root ::= .", {"\xf4\x8f\xbf\xbf"},
              {"\xc1\xbb", "\xe0\x81\xbb", "\xf0\x80\x81\xbb", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xc3"});
  expect_lang("root ::= [\xc3\xa0-\xc3\xbf]", {"\xc3\xa9"}, {"e", "\xc3\x80"});
}

TEST(Grammar, ErrorsNameLineAndColumn) {
  EXPECT_NE(error_of("root ::= foo").find("line 1, column 10"), std::string::npos) << error_of("root ::= foo");
  EXPECT_NE(error_of("root ::= foo").find("'foo'"), std::string::npos);
  EXPECT_NE(error_of("a ::= \"x\"").find("root"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"abc").find("unterminated string"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"\nb ::= [a-").find("line 2"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"\\q\"").find("unknown escape"), std::string::npos);
  EXPECT_NE(error_of("root ::= ( \"a\"").find("unclosed '('"), std::string::npos);
  EXPECT_NE(error_of("root ::= * \"a\"").find("nothing before it"), std::string::npos);
  EXPECT_NE(error_of("root ::= [z-a]").find("range"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"{3,1}").find("n < m"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"{99999}").find("above"), std::string::npos);
  EXPECT_NE(error_of("root ::= root \"a\" | \"b\"").find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= x\nx ::= \"\"? root").find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"\nroot ::= \"b\"").find("twice"), std::string::npos);
  EXPECT_NE(error_of("root = \"a\"").find("'::='"), std::string::npos);
}

TEST(Grammar, Recursion) {
  const char* g = "root ::= \"(\" root \")\" | \"\"";
  expect_lang(g, {"", "()", "((()))"}, {"(", "(()", ")("});
}

TEST(Grammar, TokensAndUtf8AcrossTokens) {
  // "é" (C3 A9) split over two tokens, and a token that spans two grammar elements.
  std::vector<std::string> t = {"\xc3", "\xa9", "a", "ab", "b", "x", "", "\xc3\xa9"};
  auto vocab = std::make_shared<TokenTrie>(t, std::vector<int>{6});
  GrammarMatcher m(std::make_shared<Grammar>(Grammar::parse("root ::= \"a\" \"\xc3\xa9\" \"b\"")), vocab);
  EXPECT_TRUE(m.allowed(2));
  EXPECT_TRUE(m.allowed(3) == false);
  EXPECT_FALSE(m.allowed(6));  // end not yet allowed
  m.accept_token(2);
  EXPECT_TRUE(m.allowed(0));
  EXPECT_TRUE(m.allowed(7));
  EXPECT_FALSE(m.allowed(1));
  m.accept_token(0);  // half a character
  EXPECT_TRUE(m.allowed(1));
  EXPECT_FALSE(m.allowed(2));
  EXPECT_FALSE(m.allowed(6));
  m.accept_token(1);
  EXPECT_TRUE(m.allowed(4));
  EXPECT_THROW(m.accept_token(5), Error);
  m.accept_token(4);
  EXPECT_TRUE(m.can_end());
  EXPECT_TRUE(m.must_end());
  EXPECT_TRUE(m.allowed(6));
  m.accept_token(6);
}

// The trie walk's mask equals asking the matcher about every token alone, at every step of
// random walks through grammars with shared prefixes, multi-byte characters and recursion.
TEST(Grammar, MaskEqualsBruteForce) {
  std::mt19937 rng(7);
  const std::vector<std::string> alphabet = {"a", "b",        "{",    "}",    "\"",           ",", " ",
                                             "1", "\xc3\xa9", "\xc3", "\xa9", "\xe2\x82\xac", ":"};
  std::vector<std::string> toks;
  for (int i = 0; i < 600; i++) {
    std::string s;
    const int n = 1 + (int)(rng() % 4);
    for (int k = 0; k < n; k++) s += alphabet[rng() % alphabet.size()];
    toks.push_back(s);
  }
  toks.push_back("");
  auto vocab = std::make_shared<TokenTrie>(toks, std::vector<int>{600});
  const std::vector<std::string> grammars = {
      json_schema_to_gbnf(
          "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\",\"maxLength\":5}},\"required\":[\"a\"]}"),
      "root ::= (\"a\" | \"\xc3\xa9\" | \"\xe2\x82\xac\")* \"}\"",
      "root ::= \"{\" ( root | [^{}] )* \"}\"",
  };
  for (const auto& gb : grammars) {
    auto g = std::make_shared<Grammar>(Grammar::parse(gb));
    GrammarMatcher m(g, vocab);
    std::string out;
    for (int step = 0; step < 40; step++) {
      const std::vector<uint64_t> mask = m.mask();
      std::vector<int> ok;
      for (int id = 0; id < 600; id++) {
        GrammarMatcher fresh(g, vocab);
        const bool viable = fresh.accept_bytes(out + toks[id]);
        const bool bit = (mask[id >> 6] >> (id & 63)) & 1;
        ASSERT_EQ(bit, viable) << "token '" << toks[id] << "' after '" << out << "'";
        if (viable) ok.push_back(id);
      }
      GrammarMatcher fresh(g, vocab);
      fresh.accept_bytes(out);
      EXPECT_EQ((bool)((mask[600 >> 6] >> (600 & 63)) & 1), fresh.can_end());
      if (ok.empty()) break;
      const int pick = ok[rng() % ok.size()];
      m.accept_token(pick);
      out += toks[pick];
    }
  }
}

TEST(Grammar, AbsurdGrammarsFailCleanly) {
  // Deep nesting of an ambiguous grammar: an error, not a crash or a hang.
  EXPECT_THROW(Grammar::parse("root ::= " + std::string(5000, '(') + "\"a\"" + std::string(5000, ')')), Error);
  std::string big = "root ::= (\"a\"{10000}){10000}";
  EXPECT_THROW(Grammar::parse(big), Error);
}

namespace {
void expect_schema(const std::string& schema, std::vector<std::string> yes, std::vector<std::string> no) {
  const std::string gb = json_schema_to_gbnf(schema);
  static auto vocab = byte_vocab();
  GrammarMatcher m(std::make_shared<Grammar>(Grammar::parse(gb)), vocab);
  for (const auto& s : yes) EXPECT_TRUE(m.matches(s)) << schema << " should accept " << s << "\n" << gb;
  for (const auto& s : no) EXPECT_FALSE(m.matches(s)) << schema << " should reject " << s << "\n" << gb;
}
}  // namespace

TEST(JsonSchema, Primitives) {
  expect_schema("{\"type\":\"string\"}", {"\"\"", "\"a b\"", "\"\\\"\\n\\u00e9\""}, {"a", "\"a", "\"\n\"", "1"});
  expect_schema("{\"type\":\"integer\"}", {"0", "-12", "1234"}, {"01", "1.5", "-", "1e3"});
  expect_schema("{\"type\":\"number\"}", {"0", "-1.25", "3e10", "2.5E-3"}, {"1.", ".5", "+1"});
  expect_schema("{\"type\":\"boolean\"}", {"true", "false"}, {"True", "1"});
  expect_schema("{\"type\":\"null\"}", {"null"}, {"nil", ""});
  expect_schema("{\"type\":[\"string\",\"null\"]}", {"null", "\"x\""}, {"1"});
}

TEST(JsonSchema, Objects) {
  const std::string s =
      "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\"},"
      "\"ok\":{\"type\":\"boolean\"}},\"required\":[\"name\"],\"additionalProperties\":false}";
  expect_schema(s,
                {"{\"name\":\"a\"}", "{\"name\":\"a\",\"age\":3}", "{ \"name\" : \"a\" , \"ok\" : true }",
                 "{\"name\":\"a\",\"age\":3,\"ok\":false}"},
                {"{}", "{\"age\":3}", "{\"name\":\"a\",}", "{\"name\":\"a\",\"x\":1}", "{\"name\":1}"});
  expect_schema("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}", {"{}", "{\"a\":1}"},
                {"{,}", "{\"a\":\"x\"}"});
  expect_schema("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}", {"{}", "{\"k\":1,\"j\":2}"},
                {"{\"k\":\"v\"}"});
  expect_schema("{\"type\":\"object\",\"additionalProperties\":false}", {"{}"}, {"{\"a\":1}"});
}

TEST(JsonSchema, Arrays) {
  expect_schema("{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":3}",
                {"[1]", "[1,2,3]", "[ 1 , 2 ]"}, {"[]", "[1,2,3,4]", "[\"a\"]", "[1,]"});
  expect_schema("{\"type\":\"array\",\"items\":{\"type\":\"boolean\"}}", {"[]", "[true,false]"}, {"[1]"});
  expect_schema("{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},{\"type\":\"string\"}],\"items\":false}",
                {"[1,\"a\"]"}, {"[1]", "[1,\"a\",2]"});
}

TEST(JsonSchema, EnumConstAnyOfRef) {
  expect_schema("{\"enum\":[\"red\",\"green\",1,null]}", {"\"red\"", "\"green\"", "1", "null"}, {"\"blue\"", "2"});
  expect_schema("{\"const\":{\"a\":[1,\"x\"]}}", {"{\"a\":[1,\"x\"]}"}, {"{\"a\":[1]}"});
  expect_schema("{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"string\",\"maxLength\":1}]}", {"1", "\"a\""},
                {"\"ab\"", "true"});
  expect_schema("{\"oneOf\":[{\"type\":\"null\"},{\"type\":\"boolean\"}]}", {"null", "true"}, {"1"});
  expect_schema(
      "{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},\"next\":{\"anyOf\":[{\"$ref\":\"#/$defs/node\"},{\"type\":\"null\"}]}},"
      "\"required\":[\"v\",\"next\"]}},\"$ref\":\"#/$defs/node\"}",
      {"{\"v\":1,\"next\":null}", "{\"v\":1,\"next\":{\"v\":2,\"next\":null}}"},
      {"{\"v\":1}", "{\"v\":1,\"next\":{\"v\":2}}"});
}

TEST(JsonSchema, StringsLengthsPatternsFormats) {
  expect_schema("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", {"\"ab\"", "\"abc\"", "\"\\nb\""},
                {"\"a\"", "\"abcd\""});
  expect_schema("{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}-\\\\d{3}$\"}", {"\"AB-123\""},
                {"\"ab-123\"", "\"AB-12\"", "\"AB-1234\""});
  expect_schema("{\"type\":\"string\",\"pattern\":\"^(cat|dog)s?$\"}", {"\"cat\"", "\"dogs\""},
                {"\"cow\"", "\"catss\""});
  expect_schema("{\"type\":\"string\",\"pattern\":\"^a.c$\"}", {"\"abc\"", "\"a-c\""}, {"\"a\\\"c\"", "\"ac\""});
  expect_schema("{\"type\":\"string\",\"format\":\"date\"}", {"\"2024-02-29\""}, {"\"2024-13-01\"", "\"24-01-01\""});
  expect_schema("{\"type\":\"string\",\"format\":\"date-time\"}",
                {"\"2024-02-29T12:30:00Z\"", "\"2024-02-29T12:30:00.5+01:00\""}, {"\"2024-02-29 12:30:00\""});
  expect_schema("{\"type\":\"string\",\"format\":\"uuid\"}", {"\"123e4567-e89b-12d3-a456-426614174000\""},
                {"\"123e4567\""});
}

// Integer ranges against their definition: every integer near the bounds (and the 16-digit
// extremes) is accepted exactly when lo <= x <= hi.
TEST(JsonSchema, IntegerRanges) {
  static auto vocab = byte_vocab();
  struct Case {
    std::string keys;
    int64_t lo, hi;
  };
  const int64_t M = 9999999999999999;
  std::vector<Case> cases = {
      {"\"minimum\":0", 0, M},
      {"\"minimum\":1,\"maximum\":12", 1, 12},
      {"\"minimum\":-5,\"maximum\":5", -5, 5},
      {"\"minimum\":-1000,\"maximum\":-7", -1000, -7},
      {"\"maximum\":37", -M, 37},
      {"\"maximum\":-3", -M, -3},
      {"\"exclusiveMinimum\":9,\"exclusiveMaximum\":100", 10, 99},
      {"\"minimum\":1.5,\"maximum\":20.5", 2, 20},
      {"\"minimum\":7,\"exclusiveMinimum\":true,\"maximum\":70,\"exclusiveMaximum\":true", 8, 69},
      {"\"minimum\":99,\"maximum\":1001", 99, 1001},
      {"\"minimum\":100,\"maximum\":199", 100, 199},
      {"\"minimum\":42,\"maximum\":42", 42, 42},
      {"\"minimum\":-123456789012,\"maximum\":98765432109876", -123456789012, 98765432109876},
      {"\"minimum\":0,\"maximum\":0", 0, 0},
  };
  std::mt19937_64 rng(7);
  for (int i = 0; i < 30; i++) {  // random ranges of random widths
    const int64_t a = (int64_t)(rng() % 4001) - 2000, w = (int64_t)(rng() % 3000);
    cases.push_back({"\"minimum\":" + std::to_string(a) + ",\"maximum\":" + std::to_string(a + w), a, a + w});
  }
  for (const Case& c : cases) {
    const std::string schema = "{\"type\":\"integer\"," + c.keys + "}";
    GrammarMatcher m(std::make_shared<Grammar>(Grammar::parse(json_schema_to_gbnf(schema))), vocab);
    std::vector<int64_t> probe = {-M, -M + 1, M - 1, M, c.lo - 1, c.lo, c.lo + 1, c.hi - 1, c.hi, c.hi + 1};
    for (int64_t x = -2100; x <= 5100; x++) probe.push_back(x);
    for (int k = 0; k < 200; k++) probe.push_back((int64_t)(rng() % (2 * (uint64_t)M + 1)) - M);
    int wrong = 0;
    for (int64_t x : probe) {
      if (x < -M || x > M) continue;
      const bool want = x >= c.lo && x <= c.hi;
      if (m.matches(std::to_string(x)) != want && wrong++ < 5)
        ADD_FAILURE() << schema << ": " << x << (want ? " rejected" : " accepted");
    }
    EXPECT_EQ(wrong, 0) << schema;
    EXPECT_FALSE(m.matches("-0" + std::string(c.lo <= 0 && c.hi >= 0 ? "1" : ""))) << schema << ": leading zeros";
    if (c.lo <= 7 && c.hi >= 7) EXPECT_FALSE(m.matches("07")) << schema;
  }
  auto code = [](const std::string& s) {
    try {
      json_schema_to_gbnf(s);
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::Io;
  };
  EXPECT_EQ(code("{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}"), ErrorCode::BadArgument);
  EXPECT_EQ(code("{\"type\":\"integer\",\"minimum\":1.2,\"maximum\":1.8}"), ErrorCode::BadArgument);
  EXPECT_EQ(code("{\"type\":\"integer\",\"minimum\":\"1\"}"), ErrorCode::BadArgument);
  EXPECT_EQ(code("{\"type\":\"integer\",\"minimum\":1e20}"), ErrorCode::BadArgument);
}

TEST(JsonSchema, BadSchemas) {
  auto code = [](const std::string& s) {
    try {
      json_schema_to_gbnf(s);
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::Io;  // no error: fails the expectations below
  };
  EXPECT_EQ(code("{\"type\":\"strin\"}"), ErrorCode::BadArgument);
  EXPECT_EQ(code("{\"type\":"), ErrorCode::BadArgument);
  EXPECT_EQ(code("{\"$ref\":\"#/$defs/missing\"}"), ErrorCode::BadArgument);
  EXPECT_EQ(code("{\"$ref\":\"http://x/y.json\"}"), ErrorCode::Unsupported);
  EXPECT_EQ(code("{\"type\":\"object\",\"required\":[\"a\"],\"properties\":{\"b\":{}}}"), ErrorCode::BadArgument);
  EXPECT_EQ(code("{\"type\":\"string\",\"pattern\":\"(?=a)\"}"), ErrorCode::Unsupported);
  EXPECT_EQ(code("{\"type\":\"array\",\"minItems\":-1}"), ErrorCode::BadArgument);
  EXPECT_EQ(code("[1]"), ErrorCode::BadArgument);
}

TEST(JsonSchema, PlacedByAGrammar) {
  auto g = compile_grammar("root ::= \"<a>\" schema \"</a>\"", "{\"type\":\"integer\"}");
  static auto vocab = byte_vocab();
  GrammarMatcher m(g, vocab);
  EXPECT_TRUE(m.matches("<a>12</a>"));
  EXPECT_FALSE(m.matches("12"));
  EXPECT_FALSE(m.matches("<a>x</a>"));
  EXPECT_THROW(compile_grammar("root ::= schema\nschema ::= \"x\"", "{}"), Error);
}
