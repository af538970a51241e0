import http2 from 'node:http2';
import { startTestGateway } from './support/gateway.js';
import { startRecordingUpstream } from './support/recording-upstream.js';
import { SEED_TABLE } from './support/seed-table.js';
const up = await startRecordingUpstream();
const gw = await startTestGateway(SEED_TABLE, { upstream: up.url });
console.log(gw.url);
const c = http2.connect(gw.url);
c.on('error', e => console.log('sess err', e));
for (let i = 0; i < 7; i++) {
  await new Promise<void>((resolve) => {
    const r = c.request({ ':method': 'POST', ':path': '/api/v1/accounts', 'content-type': 'application/json' });
    r.on('response', (h) => console.log(h[':status'], h['x-ratelimit-remaining']));
    r.on('data', (d) => console.log(String(d)));
    r.on('end', () => resolve());
    r.end('{"a":1}');
  });
}
console.log(up.seen.at(-1));
c.close();
await gw.shutdown(200); await up.close();
