/**
 * @module The `surges:` section of `limits.yaml`: stricter limits that switch on by themselves while a
 * rule's instance-wide count passes a threshold (mastodon/mastodon#25032, #20315), and off again.
 */
import * as z from 'zod';
import { show } from '../errors.js';
import { duration, positiveInt, tableList } from './formats.js';
import { RULE_NAME, ruleShape } from './rule.js';

/** A status code (`422`) or a class of them (`2xx`): what upstream answers a trigger counts. */
const STATUS_CLASS = /^[1-5]xx$/;
// Zod reports the issue of the one option whose type matched, so each option carries the message.
const statusError = (iss: { input?: unknown }): string =>
  `invalid status ${show(iss.input)} (a code from 100 to 599, or a class: 1xx … 5xx)`;
const triggerStatus = z.union(
  [
    z
      .number({ error: statusError })
      .int({ error: statusError })
      .min(100, { error: statusError })
      .max(599, { error: statusError }),
    z.string().regex(STATUS_CLASS, { error: statusError }),
  ],
  { error: statusError },
);

export const networkPrefixShape = {
  ipv4: z
    .number()
    .int()
    .min(1)
    .max(32)
    .default(24)
    .describe('IPv4 clients are one network per this many leading bits (default 24).'),
  ipv6: z
    .number()
    .int()
    .min(1)
    .max(128)
    .default(48)
    .describe('IPv6 clients are one network per this many leading bits (default 48: a site).'),
};

export const surgeTriggerShape = {
  rule: z
    .string()
    .min(1)
    .describe(
      'A rule of `limits:` whose requests are counted, across the whole instance, when the upstream answers one of `statuses`.',
    ),
  above: positiveInt().describe('The surge starts when more than this many are counted within `within`.'),
  within: duration(1000).describe('The window the count is taken over (sliding): 10m, 1h.'),
  // Security: what the gateway admitted but the upstream refused (a junk sign-up's 422) is free to send; it must not count.
  statuses: z
    .array(triggerStatus)
    .min(1)
    .default(['2xx'])
    .describe(
      'The upstream answers counted: status codes and classes (`2xx`, `422`); default 2xx. A gateway answer (429, 502…) never counts.',
    ),
  // Security: one client network (a home IPv6 /56, a rented /24) must not trip a surge meant for a wave from many.
  perNetwork: positiveInt()
    .optional()
    .describe(
      'The most one client network (`networkPrefix`) adds to the count within `within`; default a tenth of `above`, rounded up.',
    ),
  networkPrefix: z
    .object(networkPrefixShape)
    .strict()
    .prefault({})
    .describe('What one client network is, for `perNetwork`: IPv4 /24 and IPv6 /48 by default.'),
};

/** `trigger.perNetwork` as it applies: its default is a tenth of `above`, so it takes more than ten networks to start a surge. */
export function perNetworkOf(trigger: { readonly above: number; readonly perNetwork?: number | undefined }): number {
  return trigger.perNetwork ?? Math.ceil(trigger.above / 10);
}

export const surgeShape = {
  name: z
    .string()
    .regex(RULE_NAME, {
      error: (iss) => `invalid surge name ${show(iss.input)} (use letters, digits, "_", "." and "-")`,
    })
    .describe('Unique surge name; used in the metric, the log, the admin API and explain.'),
  trigger: z.object(surgeTriggerShape).strict().describe('What starts the surge.'),
  for: duration(1000).describe(
    'How long the surge lasts once started (the admin API may end it early or start it by hand).',
  ),
  limits: z
    .array(z.object(ruleShape).strict())
    .min(1)
    .describe(
      'Rules, as in `limits:`, that count only while the surge is on; their names are unique across every table.',
    ),
};

export const surgesSection = tableList(
  z.object(surgeShape).strict(),
  'Surges: stricter limits that switch on while a rule’s instance-wide count passes a threshold, for a while.',
);
