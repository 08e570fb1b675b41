import fs from 'node:fs';
import net from 'node:net';

/** Where the ephemeral range is taken to start when the OS does not say (Linux's default). */
const FALLBACK_EPHEMERAL_START = 32768;
/** The lowest port drawn: above the ports services are commonly configured on. */
const LOWEST = 10000;
const TRIES = 50;

/**
 * The first port of the OS's ephemeral range: the ports it hands out for `listen(0)` and outgoing
 * connections.
 */
function ephemeralStart(): number {
  try {
    const [low] = fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/);
    const port = Number(low);
    return Number.isInteger(port) && port > LOWEST + 1000 ? port : FALLBACK_EPHEMERAL_START;
  } catch {
    return FALLBACK_EPHEMERAL_START;
  }
}

function listenOnce(port: number, host = '127.0.0.1'): Promise<number | undefined> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', (err: NodeJS.ErrnoException) => (err.code === 'EADDRINUSE' || err.code === 'EACCES' ? resolve(undefined) : reject(err)));
    server.listen(port, host, () => {
      const { port: bound } = server.address() as net.AddressInfo;
      server.close(() => resolve(bound));
    });
  });
}

/**
 * A TCP port on 127.0.0.1 that was free a moment ago, for a server another process will start on.
 * It is drawn from below the ephemeral range: a server such as Temporal's dev server picks free
 * ports of its own for its internal services by `listen(0)`, and a port from that range handed to
 * it can be handed out again to one of those before its frontend binds it ("address already in use").
 */
export async function freePort(): Promise<number> {
  const end = ephemeralStart();
  for (let i = 0; i < TRIES; i++) {
    const port = await listenOnce(LOWEST + Math.floor(Math.random() * (end - LOWEST)));
    if (port !== undefined) return port;
  }
  const port = await listenOnce(0);
  if (port === undefined) throw new Error('no free TCP port on 127.0.0.1');
  return port;
}

/** Whether a server could listen on `host`:`port` now. */
export async function portIsFree(port: number, host = '127.0.0.1'): Promise<boolean> {
  return (await listenOnce(port, host)) !== undefined;
}
