/**
 * @module Fixtures created through the upstream's API before the scenarios run: an app, users and their tokens, a public status.
 */
import { env } from './systems.js';

export interface Fixtures {
  statusId: string;
  userToken: string;
  appToken: string;
  userTokens: string[];
  takenUsername: string;
}

export async function post(
  pathname: string,
  body: Record<string, string>,
  token?: string,
): Promise<Record<string, unknown>> {
  const res = await fetch(`${env.upstreamUrl}${pathname}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      ...(token ? { authorization: `Bearer ${token}` } : {}),
    },
    body: new URLSearchParams(body).toString(),
  });
  const json = (await res.json()) as Record<string, unknown>;
  if (!res.ok) throw new Error(`POST ${pathname}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

export async function fixtures(users: number): Promise<Fixtures> {
  const app = await post('/api/v1/apps', {
    client_name: 'rategate-bench',
    redirect_uris: 'urn:ietf:wg:oauth:2.0:oob',
    scopes: 'read write',
  });
  const tok = await post('/oauth/token', {
    grant_type: 'client_credentials',
    client_id: String(app.client_id),
    client_secret: String(app.client_secret),
    scope: 'read write',
  });
  const appToken = String(tok.access_token);
  const userTokens: string[] = [];
  for (let i = 0; i < users; i += 8) {
    const batch = Array.from({ length: Math.min(8, users - i) }, (_, j) =>
      post(
        '/api/v1/accounts',
        {
          username: `bench${i + j}`,
          email: `bench${i + j}@example.com`,
          password: 'password123',
          agreement: 'true',
          locale: 'en',
        },
        appToken,
      ),
    );
    for (const t of await Promise.all(batch)) userTokens.push(String(t.access_token));
  }
  const status = await post(
    '/api/v1/statuses',
    { status: 'Hello from the rategate bench', visibility: 'public' },
    userTokens[0],
  );
  return { statusId: String(status.id), userToken: userTokens[0]!, appToken, userTokens, takenUsername: 'bench0' };
}
