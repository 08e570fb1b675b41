/** Where trajflow connects when nothing says otherwise: the local dev server (`trajflow server start`, `--local` runs). */
export const LOCAL_PORT = 7233;
export const LOCAL_ADDRESS = `127.0.0.1:${LOCAL_PORT}`;
export const DEFAULT_NAMESPACE = 'default';
/** The local dev server's Web UI: its port is the frontend's + 1000 (src/temporal/devServer.ts). */
export const LOCAL_UI_URL = `http://127.0.0.1:${LOCAL_PORT + 1000}`;
