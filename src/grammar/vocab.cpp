// Token bytes for the grammar's trie, and grammar compilation from GBNF or JSON Schema.
#include "vocab.h"

#include <algorithm>

#include "../common.h"
#include "json_schema.h"

namespace qkv {

std::shared_ptr<TokenTrie> token_trie(const Tokenizer& tok) {
  const int n = tok.vocab_size();
  std::vector<std::string> bytes(n);
  std::vector<int> end;
  for (int id : {tok.bos_id(), tok.eos_id()})
    if (id >= 0 && id < n) end.push_back(id);
  for (int id : tok.eog_ids())
    if (id >= 0 && id < n) end.push_back(id);
  std::sort(end.begin(), end.end());
  end.erase(std::unique(end.begin(), end.end()), end.end());
  for (int id = 0; id < n; id++) {
    const int ty = tok.token_type(id);
    if (std::binary_search(end.begin(), end.end(), id) || ty == kTokControl || ty == kTokUnknown || ty == kTokUnused)
      continue;
    bytes[id] = tok.decode(-1, id);
  }
  return std::make_shared<TokenTrie>(bytes, end);
}

std::shared_ptr<Grammar> compile_grammar(const std::string& gbnf, const std::string& json_schema) {
  if (json_schema.empty()) return std::make_shared<Grammar>(Grammar::parse(gbnf));
  // A list of schemas with a grammar: rules schema-0, schema-1, ... for it to place.
  const size_t first = json_schema.find_first_not_of(" \t\r\n");
  if (!gbnf.empty() && first != std::string::npos && json_schema[first] == '[')
    return std::make_shared<Grammar>(Grammar::parse(gbnf + "\n" + json_schemas_to_gbnf(json_schema)));
  std::string schema = json_schema_to_gbnf(json_schema);
  if (gbnf.empty()) return std::make_shared<Grammar>(Grammar::parse(schema));
  // Both: the schema's value becomes the rule `schema`, for the grammar to place (e.g. between
  // a tool call's tags). The converter's text starts with its root rule.
  const std::string head = "root ::= ";
  if (schema.compare(0, head.size(), head) != 0)
    fail(ErrorCode::Internal, "JSON schema grammar without a leading root rule");
  return std::make_shared<Grammar>(Grammar::parse(gbnf + "\nschema ::= " + schema.substr(head.size())));
}

}  // namespace qkv
