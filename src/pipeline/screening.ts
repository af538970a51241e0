/**
 * @module One request on its way through the stages (screen.ts): its view, what it came with (the
 * body as its caller has it, the socket's answer), and what the stages found that its ending needs —
 * the largest body, what to forward instead of the request itself, the bans it matched — and at the
 * end the decision. The stages write it; the driver (drive.ts) hands it to the caller's `Ending`.
 */
import type http from 'node:http';
import type { Readable } from 'node:stream';
import type { BanHit } from '../guard/bans.js';
import type { Release } from '../guard/slots.js';
import type { Decision } from './decision.js';
import type { RequestView } from './request-view.js';

/** The request's body as its caller has it: the socket's stream, bytes given whole (explain), or none to read (an upgrade). */
export type BodySource = http.IncomingMessage | Buffer | null;

/** What the stages before the ending found: a refusal to write, or what the ending needs. */
export interface Screened {
  readonly decision: Decision;
  /** The request, each fact found once (its path: the raw target when it could not be normalized). */
  readonly view: RequestView;
  /** What goes upstream: the normalized path and the query. */
  readonly target: string;
  readonly maxBody: number;
  /** What to forward instead of the request itself after a body peek; null: the request. */
  readonly body: Readable | null;
  /** X-HTTP-Method-Override is not what Rails routes by: it must not reach the upstream. */
  readonly dropOverrideHeader: boolean;
  /** Bans the request matched, counted once its answer is known; null: none. */
  readonly banHits: readonly BanHit[] | null;
}

/** Who hears how the stages ended: told exactly once, in the same turn when no stage waited. */
export interface Ending {
  screened(s: Screened): void;
  /** A stage threw (a bug): the request is answered 500, the process goes on. */
  failed(err: unknown): void;
  /** A slot taken for the request: `release` runs when the exchange ends, however it ends. */
  held(release: Release): void;
}

export class Screening implements Screened {
  decision!: Decision;
  maxBody = 0;
  body: Readable | null = null;
  dropOverrideHeader = false;
  banHits: BanHit[] | null = null;

  constructor(
    readonly view: RequestView,
    /** The socket's request (read only when a rule needs it), the whole body as bytes, or null (an upgrade: never read). */
    readonly source: BodySource,
    /** A socket's plain request: a client waiting on `Expect: 100-continue` is told to send its body when it is read. */
    readonly res: http.ServerResponse | undefined,
    readonly ending: Ending,
  ) {}

  get target(): string {
    return this.view.path + this.view.query;
  }
}
