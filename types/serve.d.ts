// qkv/serve (Node): the OpenAI-compatible HTTP server of `qkv serve`, for embedding in a program.
import type { OpenAICapableModel } from './openai.js';

export interface ServeOptions {
  /** Default 8080; 0 picks a free port. */
  port?: number;
  /** Default '127.0.0.1' (loopback only). */
  host?: string;
  /** The model id clients see (default 'qkv'). */
  modelName?: string;
  /** Largest request body in bytes (default 4 MiB; larger: 413). */
  maxBodyBytes?: number;
  /** Requests queued or running at once (default 16; more: 429). */
  maxPending?: number;
  /** KV-cache length (default the model's). */
  contextLength?: number;
  /** Called after each request; aborted: the client left before the response was complete. */
  onLog?: (entry: { method: string; path: string; status: number; ms: number; aborted: boolean }) => void;
}

export interface RunningServer {
  /** The node:http Server (typed loosely: these declarations do not require @types/node). */
  server: { close(cb?: (err?: Error) => void): unknown; address(): unknown };
  /** e.g. 'http://127.0.0.1:8080/v1' (an OpenAI client's baseURL). */
  url: string;
  close(): Promise<void>;
}

/** Serves /v1/models, /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/rerank for `model`. */
export function serve(model: OpenAICapableModel, options?: ServeOptions): Promise<RunningServer>;
