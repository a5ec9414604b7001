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
  if (!gbnf.empty() && !json_schema.empty()) fail(ErrorCode::BadArgument, "give a grammar or a JSON schema, not both");
  return std::make_shared<Grammar>(Grammar::parse(gbnf.empty() ? json_schema_to_gbnf(json_schema) : gbnf));
}

}  // namespace qkv
