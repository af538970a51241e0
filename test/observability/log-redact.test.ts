/** Unit tests of the logged path: which query parameters are credentials, and what is kept of the rest. */
import { describe, expect, it } from 'vitest';
import { isCredential, loggedPath } from '../../src/observability/log-redact.js';

describe('the logged path', () => {
  it('is the path itself when there is no query', () => {
    expect(loggedPath('/api/v1/accounts/1')).toBe('/api/v1/accounts/1');
    expect(loggedPath('')).toBe('');
  });

  it('redacts the value of every credential, keeps other pairs and separators as sent', () => {
    expect(loggedPath('/api/v1/timelines/home?limit=20&access_token=abc&max_id=9')).toBe(
      '/api/v1/timelines/home?limit=20&access_token=[redacted]&max_id=9',
    );
    expect(loggedPath('/oauth/token?client_id=x;client_secret=y&code=z&refresh_token=w')).toBe(
      '/oauth/token?client_id=x;client_secret=[redacted]&code=[redacted]&refresh_token=[redacted]',
    );
    expect(loggedPath('/x?token&=v&&a=')).toBe('/x?token&=v&&a=');
    expect(loggedPath('/x?')).toBe('/x?');
  });

  it('reads names as Rack does: any case, percent-encoded, bracket parts', () => {
    expect(loggedPath('/x?Access%5Ftoken=a&user%5Bpassword%5D=b&user[otp_attempt]=c&ACCESS_TOKEN=d')).toBe(
      '/x?Access%5Ftoken=[redacted]&user%5Bpassword%5D=[redacted]&user[otp_attempt]=[redacted]&ACCESS_TOKEN=[redacted]',
    );
  });

  it('keeps nothing after a `#`', () => {
    expect(loggedPath('/x?a=1#access_token=secret')).toBe('/x?a=1#[redacted]');
    expect(loggedPath('/x?a=1#')).toBe('/x?a=1#');
  });

  it('tells credentials from look-alikes by whole short names', () => {
    for (const n of [
      'token',
      'bearer_token',
      'password',
      'password_confirmation',
      'client_secret',
      'code',
      'key',
      'api_key',
      'sig',
      'id_token',
      'confirmation_token',
    ])
      expect(isCredential(n), n).toBe(true);
    for (const n of ['limit', 'postcode', 'max_id', 'q', 'monkey', 'redirect_uri', 'scope', 'client_id'])
      expect(isCredential(n), n).toBe(false);
  });
});
