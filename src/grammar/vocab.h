// The bridge from a tokenizer to the grammar engine: each token's bytes as decoding emits them.
#pragma once
#include <memory>
#include <string>

#include "../tokenizer/tokenizer.h"
#include "matcher.h"

namespace qkv {

// Token bytes for masks: decoded bytes of normal, user-defined and byte tokens; control,
// unknown and unused tokens have none (never allowed). The end set is BOS, EOS and the
// end-of-generation ids: the ids generation stops at.
std::shared_ptr<TokenTrie> token_trie(const Tokenizer& tok);

// A grammar from GBNF text, from a JSON Schema, or from both: then the schema's value is the
// rule `schema`, which the GBNF (its `root`) places, e.g. root ::= "<tool_call>" schema "</tool_call>";
// with a JSON array of schemas, rules schema-0, schema-1, ... (one per tool of a forced call).
std::shared_ptr<Grammar> compile_grammar(const std::string& gbnf, const std::string& json_schema);

}  // namespace qkv
