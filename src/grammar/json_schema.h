// JSON Schema -> GBNF, for structured output. Supports: type (string, number, integer, boolean,
// null, object, array, and lists of them), properties / required / additionalProperties,
// items / prefixItems / minItems / maxItems, enum, const, anyOf / oneOf, allOf of one schema,
// $ref within the schema (#/$defs/..., #/definitions/..., #), minLength / maxLength, pattern
// (regular expressions of the common kinds) and format (date, time, date-time, uuid). Keywords
// that constrain values the grammar cannot express (minimum, multipleOf, ...) are ignored; an
// unknown type or an unresolvable $ref is BadArgument, an unsupported construct Unsupported.
#pragma once
#include <string>

namespace qkv {

// `schema_json`: the schema as JSON text. Returns GBNF with a `root` rule for one JSON value
// (compact, at most a little whitespace between tokens, bounded so that generation ends).
std::string json_schema_to_gbnf(const std::string& schema_json);

// The GBNF of any JSON object ({type: 'json_object'} response formats).
std::string json_object_gbnf();

}  // namespace qkv
