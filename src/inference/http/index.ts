/** Model servers over HTTP (vLLM, SGLang) behind the InferenceProvider interface. */
export { createHttpProvider, type HttpProviderOptions } from './httpProvider';
export { isAbortError, MalformedResponseError, ServerRejectedError, ServerUnavailableError } from './errors';
export type { ServerBackend } from './backend';
