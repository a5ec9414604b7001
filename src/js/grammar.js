// Constrained decoding options (grammar: GBNF text; jsonSchema: a JSON Schema object or its JSON
// text), checked here and handed to the WASM sampler, which masks every step to the grammar.
import { QkvError, check } from './errors.js';
import { call } from './util.js';

/** Validates {grammar, jsonSchema}; returns them normalized ({grammar: string, jsonSchema: string}, or {}). */
export function constraintOptions(options) {
  const { grammar, jsonSchema } = options;
  if (grammar === undefined && jsonSchema === undefined) return {};
  check(grammar === undefined || (typeof grammar === 'string' && grammar.length > 0),
    `grammar must be a non-empty string of GBNF, got ${grammar === null ? 'null' : typeof grammar}`);
  check(grammar === undefined || jsonSchema === undefined, 'give grammar or jsonSchema, not both');
  if (jsonSchema === undefined) return { grammar };
  let text = jsonSchema;
  if (typeof jsonSchema !== 'string') {
    check((jsonSchema !== null && typeof jsonSchema === 'object' && !Array.isArray(jsonSchema)) || typeof jsonSchema === 'boolean',
      `jsonSchema must be a JSON Schema (an object, or its JSON text), got ${jsonSchema === null ? 'null' : typeof jsonSchema}`);
    try {
      text = JSON.stringify(jsonSchema);
    } catch (e) {
      throw new QkvError('bad_argument', `jsonSchema must be JSON-serializable (${e.message})`);
    }
  }
  return { jsonSchema: text };
}

/** Applies normalized constraint options to a WASM sampler of `model`. */
export function constrainSampler(model, sampler, opts) {
  if (opts.grammar === undefined && opts.jsonSchema === undefined) return;
  call(() => model._h.constrain(sampler, opts.grammar ?? '', opts.jsonSchema ?? ''));
}

/** GBNF text for a JSON Schema (object or JSON text), as the engine constrains output with it. */
export function jsonSchemaToGrammar(mod, schema) {
  const { jsonSchema } = constraintOptions({ jsonSchema: schema });
  return call(() => mod.jsonSchemaToGrammar(jsonSchema));
}
