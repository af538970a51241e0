import { describe, expect, it } from 'vitest';
import { TagMemo } from '../../src/keys/tag-memo.js';
import { compileKey } from '../../src/keys/index.js';
import { keyFacts } from '../support/key-facts.js';

describe('TagMemo', () => {
  it('gives each value its own tag, clients taking turns and past the bound', () => {
    const memo = new TagMemo('ip:', 8);
    for (let round = 0; round < 3; round++)
      for (let i = 0; i < 20; i++) {
        const value = `203.0.113.${i}`;
        expect(memo.of(value)).toBe(`ip:${value}`);
        expect(memo.size).toBeLessThanOrEqual(8);
      }
  });

  it('tells apart values that differ in one character, and the empty value', () => {
    const memo = new TagMemo('acct:');
    expect(memo.of('a:42')).toBe('acct:a:42');
    expect(memo.of('a:43')).toBe('acct:a:43');
    expect(memo.of('a:42')).toBe('acct:a:42');
    expect(memo.of('')).toBe('acct:');
  });
});

describe('one-kind keys through the shared memo', () => {
  it('tag each client as its own under two rules of one kind, clients taking turns', () => {
    const [a, b] = [compileKey('ip'), compileKey('ip')];
    const header = compileKey('header:x-app-id');
    for (let round = 0; round < 3; round++)
      for (let i = 0; i < 50; i++) {
        const ipKey = `40.${i}.255.9`;
        const facts = keyFacts({ ipKey, headers: { 'x-app-id': ipKey } });
        expect(a.tag(facts)).toBe(`ip:${ipKey}`);
        expect(b.tag(facts)).toBe(`ip:${ipKey}`);
        expect(header.tag(facts)).not.toBe(`ip:${ipKey}`);
      }
  });
});
