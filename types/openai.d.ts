// qkv/openai: an OpenAI-shaped client over a qkv model, in process or through qkv/worker.
// Requests and responses follow OpenAI's chat-completions, completions, embeddings and models
// APIs field for field (and llama.cpp's rerank); see docs/openai.md.

import type { ImageInput } from './index.js';

export interface OpenAIRequestOptions {
  /** Stops the request (a stream throws QkvError('aborted')). */
  signal?: AbortSignal;
}

/** qkv's extension field (`qkv` in a request): sampling options OpenAI lacks, and a raw grammar. */
export interface QkvExtension {
  top_k?: number;
  min_p?: number;
  repetition_penalty?: number;
  repetition_window?: number;
  /** GBNF text (llama.cpp's format) the reply must match. */
  grammar?: string;
}

export type ChatRole = 'system' | 'developer' | 'user' | 'assistant' | 'tool';

export interface ChatCompletionMessageToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface ChatCompletionMessageParam {
  role: ChatRole;
  /** Image parts ({type: 'image_url', image_url: {url: 'data:image/png;base64,...'}}, or qkv's {type: 'image', image}) need a model loaded with an mmproj. */
  content: string | null | Array<{ type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string } | string } | { type: 'image'; image: ImageInput }>;
  name?: string;
  tool_calls?: ChatCompletionMessageToolCall[];
  tool_call_id?: string;
}

export interface ChatCompletionTool {
  type: 'function';
  function: { name: string; description?: string; parameters?: Record<string, unknown>; strict?: boolean | null };
}

export type ChatCompletionToolChoice =
  | 'none' | 'auto' | 'required'
  | { type: 'function'; function: { name: string } };

export type ResponseFormat =
  | { type: 'text' }
  | { type: 'json_object' }
  | { type: 'json_schema'; json_schema: { name: string; description?: string; schema?: Record<string, unknown>; strict?: boolean | null } };

interface CommonParams {
  model?: string;
  stream?: boolean | null;
  stream_options?: { include_usage?: boolean } | null;
  /** [0, 2], default 1. */
  temperature?: number | null;
  /** [0, 1], default 1. */
  top_p?: number | null;
  seed?: number | null;
  stop?: string | string[] | null;
  presence_penalty?: number | null;
  frequency_penalty?: number | null;
  /** {token id: bias in [-100, 100]} */
  logit_bias?: Record<string, number> | null;
  /** Choices to generate (one after another; seeds seed, seed + 1, ...). */
  n?: number | null;
  max_tokens?: number | null;
  user?: string;
  qkv?: QkvExtension;
}

export interface ChatCompletionCreateParams extends CommonParams {
  messages: ChatCompletionMessageParam[];
  max_completion_tokens?: number | null;
  logprobs?: boolean | null;
  top_logprobs?: number | null;
  tools?: ChatCompletionTool[];
  tool_choice?: ChatCompletionToolChoice;
  parallel_tool_calls?: boolean | null;
  response_format?: ResponseFormat;
  metadata?: unknown;
  store?: boolean | null;
  service_tier?: unknown;
  reasoning_effort?: unknown;
}

export interface TopLogprob { token: string; logprob: number; bytes: number[] | null }
export interface ChatCompletionTokenLogprob extends TopLogprob { top_logprobs: TopLogprob[] }

export interface CompletionUsage { prompt_tokens: number; completion_tokens: number; total_tokens: number }

export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  system_fingerprint: null;
  choices: Array<{
    index: number;
    message: { role: 'assistant'; content: string | null; refusal: null; tool_calls?: ChatCompletionMessageToolCall[] };
    logprobs: { content: ChatCompletionTokenLogprob[]; refusal: null } | null;
    finish_reason: 'stop' | 'length' | 'tool_calls';
  }>;
  usage: CompletionUsage;
}

export interface ChatCompletionChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  system_fingerprint: null;
  choices: Array<{
    index: number;
    delta: {
      role?: 'assistant';
      content?: string | null;
      refusal?: null;
      tool_calls?: Array<{ index: number; id?: string; type?: 'function'; function?: { name?: string; arguments?: string } }>;
    };
    logprobs: { content: ChatCompletionTokenLogprob[]; refusal: null } | null;
    finish_reason: 'stop' | 'length' | 'tool_calls' | null;
  }>;
  /** Only on the last chunk, with stream_options.include_usage. */
  usage?: CompletionUsage;
}

export interface CompletionCreateParams extends CommonParams {
  /** One prompt (a string, or an array of one string). */
  prompt: string | [string];
  /** Top alternatives per token, 0..5. */
  logprobs?: number | null;
  echo?: boolean | null;
  best_of?: 1 | null;
  suffix?: null;
}

export interface Completion {
  id: string;
  object: 'text_completion';
  created: number;
  model: string;
  system_fingerprint: null;
  choices: Array<{
    text: string;
    index: number;
    logprobs: { tokens: string[]; token_logprobs: number[]; top_logprobs: Array<Record<string, number>>; text_offset: number[] } | null;
    finish_reason: 'stop' | 'length' | null;
  }>;
  usage?: CompletionUsage;
}

export interface EmbeddingCreateParams {
  input: string | string[];
  model?: string;
  encoding_format?: 'float' | 'base64';
  /** Must equal the model's dimension if given. */
  dimensions?: number;
  user?: string;
}

export interface CreateEmbeddingResponse {
  object: 'list';
  data: Array<{ object: 'embedding'; index: number; embedding: number[] | string }>;
  model: string;
  usage: { prompt_tokens: number; total_tokens: number };
}

/** llama.cpp's /v1/rerank request (Jina's and Cohere's shape), for reranker models. */
export interface RerankCreateParams {
  model?: string;
  query: string;
  /** Strings, or Cohere's {text} objects. */
  documents?: Array<string | { text: string }>;
  /** llama.cpp's alias of documents. */
  texts?: Array<string | { text: string }>;
  /** How many results to return, best first (default all). */
  top_n?: number;
  /** Add each result's document ({text}). */
  return_documents?: boolean;
  user?: string;
}

export interface RerankResponse {
  object: 'list';
  model: string;
  /** Highest relevance_score first. */
  results: Array<{ index: number; relevance_score: number; document?: { text: string } }>;
  /** Tokens of every (query, document) pair read. */
  usage: { prompt_tokens: number; total_tokens: number };
}

export interface ModelObject { id: string; object: 'model'; created: number; owned_by: 'qkv' }

export type ToolFormat = 'hermes' | 'llama3' | 'mistral' | 'functionary' | 'granite' | 'deepseek' | 'commandr' | 'gptoss' | 'json';

export interface OpenAIClient {
  chat: {
    completions: {
      create(req: ChatCompletionCreateParams & { stream: true }, options?: OpenAIRequestOptions): Promise<AsyncIterable<ChatCompletionChunk>>;
      create(req: ChatCompletionCreateParams & { stream?: false | null }, options?: OpenAIRequestOptions): Promise<ChatCompletion>;
      create(req: ChatCompletionCreateParams, options?: OpenAIRequestOptions): Promise<ChatCompletion | AsyncIterable<ChatCompletionChunk>>;
    };
  };
  completions: {
    create(req: CompletionCreateParams & { stream: true }, options?: OpenAIRequestOptions): Promise<AsyncIterable<Completion>>;
    create(req: CompletionCreateParams & { stream?: false | null }, options?: OpenAIRequestOptions): Promise<Completion>;
    create(req: CompletionCreateParams, options?: OpenAIRequestOptions): Promise<Completion | AsyncIterable<Completion>>;
  };
  embeddings: { create(req: EmbeddingCreateParams, options?: OpenAIRequestOptions): Promise<CreateEmbeddingResponse> };
  /** Reranker models (Model.rerank): llama.cpp's /v1/rerank. */
  rerank: { create(req: RerankCreateParams, options?: OpenAIRequestOptions): Promise<RerankResponse> };
  models: { list(): Promise<{ object: 'list'; data: ModelObject[] }>; retrieve(id: string): Promise<ModelObject> };
  /** The tool-call format read from the model's chat template. */
  toolFormat(): Promise<ToolFormat>;
}

/** A model from qkv's loadModel or from qkv/worker's loadModel. */
export interface OpenAICapableModel {
  readonly info: { chatFormat?: string };
}

/**
 * An OpenAI-shaped client over a loaded model. Requests run one at a time on one KV cache;
 * a stream holds its turn until it ends or the caller leaves the loop.
 */
export interface CreateOpenAIOptions {
  /** The model id responses carry (default 'qkv'). */
  modelName?: string;
  /** The KV cache's length (default the model's). */
  contextLength?: number;
  /** The tool-call format, when the chat template's is not recognized (default: read from the template). */
  toolFormat?: ToolFormat;
}


export function createOpenAI(model: OpenAICapableModel, options?: CreateOpenAIOptions): OpenAIClient;
