/**
 * @module What the requests of one connection share, kept with the connection: its peer as the policy
 * resolved it, and its last token's SHA-256 (~260 ns, the largest single cost of the account look-up)
 * and format check. A client sends the same token on every request of a keep-alive connection, and
 * its peer never changes. Reading `socket.remoteAddress` alone cost ~530 instructions per request (a
 * getter, a megamorphic load on the TCP handle). Security: the raw token is kept only while the
 * connection that sent it is open (it arrived on it), never beyond. A digest is reused only for the
 * very same string on the same connection, so no client's request is ever answered from another
 * connection's entry (no cross-client hit, nothing to time). Memory: one entry per open connection,
 * ~300 B with a Doorkeeper token; a token longer than MEMO_MAX is hashed each time and not kept. Behind a
 * trusted proxy, also the last X-Forwarded-For's client and the chain sent on (an X-Forwarded-For longer
 * than MEMO_MAX is walked each time and not kept).
 */
import type { ClientIp, ClientIpResolver, Peer } from './ip.js';
import { extendedChain } from './forwarded.js';
import { isIntrospectable, tokenDigest } from './token-digest.js';

/** Longer tokens (a large JWT) are not kept: the memo's memory per connection stays small. */
export const MEMO_MAX = 512;

/** Who resolved the memo's peer: a reload's new resolver (new trusted proxies) resolves it again. */
type PeerOf = (addr: string | undefined) => Peer;
type BehindOf = ClientIpResolver['behind'];

export class ConnectionMemo {
  private peerOf: PeerOf | null = null;
  private peer_: Peer | null = null;
  private token: string | null = null;
  /** The kept token's digest, taken when first asked (a junk token's format check needs none). */
  private digest: string | null = null;
  private introspectable = false;
  /** The last X-Forwarded-For a trusted peer sent (at most MEMO_MAX long): the client it named, and the chain sent on (made when first asked). */
  private xff: string | null = null;
  private xffPeer: Peer | null = null;
  private behindOf: BehindOf | null = null;
  private xffClient: ClientIp | null = null;
  private xffChain: string | null = null;

  /** The connection's peer as `peerOf` resolves the socket's address (read only the first time, or after a reload). */
  peer(peerOf: PeerOf, socket: { readonly remoteAddress?: string | undefined }): Peer {
    if (this.peerOf !== peerOf || this.peer_ === null) {
      this.peer_ = peerOf(socket.remoteAddress);
      this.peerOf = peerOf;
    }
    return this.peer_;
  }

  /**
   * The client behind a trusted `peer` by its X-Forwarded-For as `behind` walks it: the last request's
   * when it sent the very same header. A proxy's connection often carries one client's requests back to
   * back (a flood's above all); a walk costs a parse, a slice and a cache look-up by a fresh string.
   */
  clientBehind(behind: BehindOf, peer: Peer, xff: string): ClientIp {
    if (xff === this.xff && peer === this.xffPeer && behind === this.behindOf) return this.xffClient!;
    // `behind` reads only X-Forwarded-For when it is present, never `Forwarded`.
    const client = behind(peer, xff, undefined);
    if (xff.length <= MEMO_MAX) {
      this.xff = xff;
      this.xffPeer = peer;
      this.behindOf = behind;
      this.xffClient = client;
      this.xffChain = null;
    }
    return client;
  }

  /** `extendedChain` (identity/forwarded.ts) of `xff` and the peer's address: made once for the header clientBehind kept. */
  extendedChain(xff: string, peer: Peer): string {
    if (xff !== this.xff || peer !== this.xffPeer) return extendedChain(xff, peer.client.address);
    return (this.xffChain ??= extendedChain(xff, peer.client.address));
  }

  /** `tokenDigest(token)`, from the connection's last request when it carried the same token. */
  tokenDigest(token: string): string {
    if (!this.remember(token)) return tokenDigest(token);
    return (this.digest ??= tokenDigest(token));
  }

  /** `isIntrospectable(token)`, from the connection's last request when it carried the same token. */
  tokenIntrospectable(token: string): boolean {
    return this.remember(token) ? this.introspectable : isIntrospectable(token);
  }

  /** Whether `token` is (now) the one kept; false for one too long to keep. */
  private remember(token: string): boolean {
    if (token === this.token) {
      // The request's own string from now on: its next comparison is by identity. A token sliced from
      // its header compares by content in the runtime (~450 instructions), and a request asks twice.
      this.token = token;
      return true;
    }
    if (token.length > MEMO_MAX) return false;
    this.token = token;
    this.digest = null;
    this.introspectable = isIntrospectable(token);
    return true;
  }
}

const byConnection = new WeakMap<object, ConnectionMemo>();

/**
 * The memo of the connection `req` came on, made at its first request: its socket, or for HTTP/2 its
 * session (an HTTP/2 request's `socket` is a proxy made per stream, which would give every request a
 * memo of its own).
 */
export function connectionMemoOf(req: { readonly socket: object; readonly stream?: unknown }): ConnectionMemo {
  const session = (req.stream as { session?: object } | undefined)?.session;
  const connection = session ?? req.socket;
  let memo = byConnection.get(connection);
  if (memo === undefined) {
    memo = new ConnectionMemo();
    byConnection.set(connection, memo);
  }
  return memo;
}
