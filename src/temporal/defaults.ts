/** Where trajflow connects when nothing says otherwise: the local dev server (`trajflow server start`, `--local` runs). */
export const LOCAL_PORT = 7233;
export const LOCAL_ADDRESS = `127.0.0.1:${LOCAL_PORT}`;
export const DEFAULT_NAMESPACE = 'default';
