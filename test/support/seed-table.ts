/** @module The seed's limit table exactly as SPEC §3 gives it (config/limits.yaml must equal it). */

export const SEED_TABLE = `limits:
  - name: account-access
    match: /api/*                  # any method
    per: account
    limit: 300
    period: 5m
  - name: ip-access
    match: /api/*
    per: ip
    limit: 300
    period: 5m
  - name: sign-up
    match: POST /api/v1/accounts
    per: ip
    limit: 5
    period: 30m
  - name: uploading                # Mastodon throttles /api/v<digits>/media: v1 and v2 share it
    match: [POST /api/v1/media, POST /api/v2/media]
    per: account
    limit: 30
    period: 30m
  - name: deletion                 # one bucket shared by both routes
    match: [DELETE /api/v1/statuses/:id, POST /api/v1/statuses/:id/unreblog]
    per: account
    limit: 30
    period: 30m
`;
