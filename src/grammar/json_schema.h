// JSON Schema -> GBNF, for structured output. Supports: type (string, number, integer, boolean,
// null, object, array, and lists of them), properties / required / additionalProperties,
// items / prefixItems / minItems / maxItems, enum, const, anyOf / oneOf, allOf of one schema,
// $ref within the schema (#/$defs/..., #/definitions/..., #), minLength / maxLength, pattern
// (regular expressions of the common kinds), format (date, time, date-time, uuid) and, for
// integers, minimum / maximum / exclusiveMinimum / exclusiveMaximum (exactly). Keywords the
// grammar does not express (number ranges, multipleOf, ...) are ignored, as llama.cpp does; an
// unknown type or an unresolvable $ref is BadArgument, an unsupported construct Unsupported.
#pragma once
#include <string>

namespace qkv {

// `schema_json`: the schema as JSON text. Returns GBNF with a `root` rule for one JSON value
// (compact, at most a little whitespace between tokens, bounded so that generation ends).
std::string json_schema_to_gbnf(const std::string& schema_json);

// Several schemas (a JSON array of them): GBNF rules `schema-0`, `schema-1`, ... (no root), for a
// grammar that places them, e.g. one per tool of a forced call.
std::string json_schemas_to_gbnf(const std::string& schemas_json);

// The GBNF of any JSON object ({type: 'json_object'} response formats).
std::string json_object_gbnf();

}  // namespace qkv
