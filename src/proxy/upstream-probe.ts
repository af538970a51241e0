/**
 * @module Does the default upstream answer? A real HTTP request (HEAD upstream.healthPath) with a short
 * deadline, not only a TCP connection: a frozen upstream (a Puma stopped with SIGSTOP, a deadlocked
 * worker pool) still completes the handshake, since the kernel accepts connections into its backlog, and
 * only a request shows it no longer answers. Any HTTP status counts as answering; what the status means
 * is the upstream's business, not the gateway's.
 *
 * Readers never wait longer than WAIT_MS for it: /readyz and /metrics stay fast (kubelet's probe gives up
 * after a second, a scrape after its interval when that is shorter than 10 s) while a probe to a frozen upstream runs to its deadline; they get the last answer, and
 * the next read after that deadline gets the new one. A probe starts at most once a second, and only when
 * read: an unwatched gateway sends nothing.
 */
import { Client } from 'undici';
import { VERSION } from '../observability/version.js';

/** How long one probe waits for the upstream's response headers, at most (the upstream timeout if shorter). */
export const PROBE_TIMEOUT_MS = 5_000;
/**
 * How long a reader waits for a probe in flight before taking the last answer: long enough for a refused
 * connection or a healthy answer (milliseconds), short beside a scrape's or kubelet's timeout (1 s, or the
 * scrape interval when shorter than 10 s).
 */
const WAIT_MS = 250;
/** A probe starts at most this often, whatever the rate of reads. */
const EVERY_MS = 1_000;

/** Sent with every probe, so the upstream's logs (and tests) can tell it from client traffic. */
export const PROBE_USER_AGENT = `rategate/${VERSION} upstream-probe`;

export interface ProbeResult {
  readonly up: boolean;
  /** When the probe ended (ms since the epoch). */
  readonly at: number;
  /** How long the upstream took to answer, or to fail. */
  readonly ms: number;
  /** Why it is down: refused, timeout (no answer within the deadline), or the socket's error code. */
  readonly error?: string;
}

export class UpstreamProbe {
  private last: ProbeResult | undefined;
  private running: Promise<ProbeResult> | undefined;
  private startedAt = -Infinity;
  private readonly timeoutMs: number;

  constructor(
    private readonly origin: string,
    private readonly path: string,
    upstreamTimeoutMs: number,
    private readonly now: () => number = Date.now,
  ) {
    this.timeoutMs = Math.min(PROBE_TIMEOUT_MS, upstreamTimeoutMs);
  }

  /** Is the upstream answering? A new answer within WAIT_MS, else the last one (true before the first). */
  async up(): Promise<boolean> {
    return (await this.read())?.up ?? true;
  }

  /** The last probe's result, starting a new probe when due (undefined: none has ended yet). */
  async read(): Promise<ProbeResult | undefined> {
    if (this.running === undefined && this.now() - this.startedAt >= EVERY_MS) this.start();
    if (this.running !== undefined) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([this.running, new Promise((resolve) => (timer = setTimeout(resolve, WAIT_MS)))]);
      clearTimeout(timer);
    }
    return this.last;
  }

  private start(): void {
    this.startedAt = this.now();
    this.running = this.probe().then((r) => {
      this.last = r;
      this.running = undefined;
      return r;
    });
  }

  /**
   * Through undici, as the forwarder sends: a node:http client socket would be one more class of socket
   * in node's stream code, which then turns megamorphic for every request (http/socket-shape.ts).
   */
  private probe(): Promise<ProbeResult> {
    const started = performance.now();
    const u = new URL(this.path, this.origin);
    const client = new Client(u.origin, {
      // The probe asks whether the upstream answers; the forwarder is the one that checks its certificate.
      connect: { rejectUnauthorized: false, timeout: this.timeoutMs },
      headersTimeout: this.timeoutMs,
      bodyTimeout: this.timeoutMs,
      pipelining: 1,
    });
    return new Promise<ProbeResult>((resolve) => {
      let done = false;
      const end = (up: boolean, error?: string): void => {
        if (done) return;
        done = true;
        clearTimeout(deadline);
        client.destroy().catch(() => {});
        const ms = Math.round(performance.now() - started);
        resolve(error === undefined ? { up, at: this.now(), ms } : { up, at: this.now(), ms, error });
      };
      // One deadline for connecting and answering: a frozen upstream accepts the connection and says nothing.
      const deadline = setTimeout(() => end(false, 'timeout'), this.timeoutMs);
      deadline.unref();
      client
        .request({
          method: 'HEAD',
          path: u.pathname + u.search,
          headers: { 'user-agent': PROBE_USER_AGENT, connection: 'close' },
        })
        .then(
          (res) => {
            res.body.dump().catch(() => {});
            end(true);
          },
          (err: NodeJS.ErrnoException) => end(false, errorName(err)),
        );
    });
  }
}

/** A failed probe's reason: `refused`, `timeout`, or the socket's error code. */
function errorName(err: NodeJS.ErrnoException): string {
  if (err.code === 'ECONNREFUSED') return 'refused';
  if (err.code === 'UND_ERR_HEADERS_TIMEOUT' || err.code === 'UND_ERR_CONNECT_TIMEOUT') return 'timeout';
  // undici wraps a socket's own error (reset, closed before an answer) with the socket's code as its cause.
  const cause = (err as { cause?: NodeJS.ErrnoException }).cause;
  return err.code === 'UND_ERR_SOCKET' && cause?.code !== undefined ? cause.code : (err.code ?? err.message);
}
