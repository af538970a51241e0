/** Request ids: the client's when usable, else one made from this process's random prefix and a counter. */
import type http from 'node:http';
import { describe, expect, it, vi } from 'vitest';
import { requestId } from '../../src/http/message.js';

const req = (headers: http.IncomingHttpHeaders): http.IncomingMessage => ({ headers }) as http.IncomingMessage;

describe('requestId', () => {
  it("keeps the client's X-Request-Id when it is a plain token of sane length", () => {
    expect(requestId(req({ 'x-request-id': 'req-abc.123' }))).toBe('req-abc.123');
    expect(requestId(req({ 'x-request-id': 'has spaces' }))).not.toBe('has spaces');
    expect(requestId(req({ 'x-request-id': 'x'.repeat(129) }))).not.toBe('x'.repeat(129));
  });

  it("makes UUID-shaped ids that share the process's random prefix and count up in their last 12 hex digits", () => {
    const ids = Array.from({ length: 3 }, () => requestId(req({})));
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(new Set(ids.map((id) => id.slice(0, 24))).size).toBe(1);
    const counts = ids.map((id) => parseInt(id.slice(24), 16));
    expect(counts).toEqual([counts[0], counts[0]! + 1, counts[0]! + 2]);
  });

  it('draws another prefix in another process (a fresh module instance), so replicas and restarts never share ids', async () => {
    const a = requestId(req({}));
    vi.resetModules();
    const fresh = (await import('../../src/http/message.js')).requestId;
    const b = fresh(req({}));
    expect(b.slice(0, 24)).not.toBe(a.slice(0, 24));
  });
});
