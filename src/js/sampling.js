// Sampling options beyond run.c's, checked here and handed to the WASM sampler: constrained
// decoding (grammar: GBNF text; jsonSchema: a JSON Schema object or its JSON text), OpenAI's
// presence/frequency penalties and logit bias, and per-token log-probabilities.
import { QkvError, check } from './errors.js';
import { call } from './util.js';

/** Validates {grammar, jsonSchema}; returns them normalized ({grammar: string, jsonSchema: string}, or {}). */
export function constraintOptions(options) {
  const { grammar, jsonSchema } = options;
  if (grammar === undefined && jsonSchema === undefined) return {};
  check(grammar === undefined || (typeof grammar === 'string' && grammar.length > 0),
    `grammar must be a non-empty string of GBNF, got ${grammar === null ? 'null' : typeof grammar}`);
  if (jsonSchema === undefined) return { grammar };
  let text = jsonSchema;
  if (typeof jsonSchema !== 'string') {
    // A list of schemas goes with a grammar that places them (rules schema-0, schema-1, ...).
    const list = Array.isArray(jsonSchema) && grammar !== undefined && jsonSchema.length > 0;
    check((jsonSchema !== null && typeof jsonSchema === 'object' && (!Array.isArray(jsonSchema) || list)) || typeof jsonSchema === 'boolean',
      `jsonSchema must be a JSON Schema (an object, or its JSON text; a list of them only with a grammar), got ${jsonSchema === null ? 'null' : Array.isArray(jsonSchema) ? 'an array' : typeof jsonSchema}`);
    try {
      text = JSON.stringify(jsonSchema);
    } catch (e) {
      throw new QkvError('bad_argument', `jsonSchema must be JSON-serializable (${e.message})`);
    }
  }
  return grammar === undefined ? { jsonSchema: text } : { grammar, jsonSchema: text };
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

function checkRange(options, key, lo, hi, integer = false) {
  const v = options[key];
  if (v === undefined) return;
  check(typeof v === 'number' && !Number.isNaN(v), `${key} must be a number, got ${typeof v === 'number' ? v : typeof v}`);
  check(v >= lo && v <= hi, `${key} must be in [${lo}, ${hi}], got ${v}`);
  if (integer) check(Number.isInteger(v), `${key} must be an integer, got ${v}`);
}

/** Validates presencePenalty, frequencyPenalty, logitBias ({tokenId: bias}) and logprobs (top alternatives, 0..20). */
export function samplingExtras(options) {
  checkRange(options, 'presencePenalty', -2, 2);
  checkRange(options, 'frequencyPenalty', -2, 2);
  checkRange(options, 'logprobs', 0, 20, true);
  const bias = options.logitBias;
  if (bias !== undefined) {
    check(bias !== null && typeof bias === 'object' && !Array.isArray(bias), 'logitBias must be an object {token id: bias}');
    for (const [k, v] of Object.entries(bias)) {
      check(/^\d+$/.test(k), `logitBias: key '${k}' is not a token id`);
      check(typeof v === 'number' && v >= -100 && v <= 100, `logitBias['${k}'] must be a number in [-100, 100]`);
    }
  }
  return {};
}

/** Adds the sampler's log-probabilities (if asked for) to a generated item. */
export function withLogprobs(item, lp) {
  if (!lp) return item;
  item.logprob = lp.logprob;
  item.topLogprobs = lp.top.map(([token, logprob]) => ({ token, logprob }));
  return item;
}
