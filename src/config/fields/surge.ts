/**
 * @module The `surges:` section of `limits.yaml`: stricter limits that switch on by themselves while a
 * rule's instance-wide count passes a threshold (mastodon/mastodon#25032, #20315), and off again.
 */
import * as z from 'zod';
import { show } from '../errors.js';
import { duration, positiveInt, tableList } from './formats.js';
import { RULE_NAME, ruleShape } from './rule.js';

export const surgeTriggerShape = {
  rule: z.string().min(1).describe('A rule of `limits:` whose admitted requests are counted, across the whole instance.'),
  above: positiveInt().describe('The surge starts when more than this many are admitted within `within`.'),
  within: duration(1000).describe('The window the count is taken over (sliding): 10m, 1h.'),
};

export const surgeShape = {
  name: z
    .string()
    .regex(RULE_NAME, { error: (iss) => `invalid surge name ${show(iss.input)} (use letters, digits, "_", "." and "-")` })
    .describe('Unique surge name; used in the metric, the log, the admin API and explain.'),
  trigger: z.object(surgeTriggerShape).strict().describe('What starts the surge.'),
  for: duration(1000).describe('How long the surge lasts once started (the admin API may end it early or start it by hand).'),
  limits: z
    .array(z.object(ruleShape).strict())
    .min(1)
    .describe('Rules, as in `limits:`, that count only while the surge is on; their names are unique across every table.'),
};

export const surgesSection = tableList(
  z.object(surgeShape).strict(),
  'Surges: stricter limits that switch on while a rule’s instance-wide count passes a threshold, for a while.',
);
