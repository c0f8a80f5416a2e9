// Unit tests of the JavaScript guest SDK: node --test sdk/js
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as g from './emseepea-guest.js';

const bytes = (s) => Buffer.from(s, 'utf8');

test('page takes limit + 1 rows and tells the truth', () => {
  assert.equal(g.fetch(3), 4);
  assert.deepEqual(g.page([0, 1, 2, 3], 3), { entries: [0, 1, 2], hasMore: true });
  assert.deepEqual(g.page([0, 1, 2], 3), { entries: [0, 1, 2], hasMore: false });
  assert.deepEqual(g.page([], 3), { entries: [], hasMore: false });
  assert.deepEqual(g.page([1, 2], 0), { entries: [], hasMore: false });
  let pulled = 0;
  function* rows() {
    for (let i = 0; ; i++) {
      pulled++;
      yield i;
    }
  }
  g.page(rows(), 2);
  assert.equal(pulled, 3);
});

test('numbers sort numerically', () => {
  const ns = [0, 1, 9, 10, 99, 100, 2n ** 64n - 1n];
  const keys = ns.map(g.number);
  assert.deepEqual([...keys].sort(), keys);
  const ss = [-(2n ** 63n), -100, -1, 0, 1, 2n ** 63n - 1n];
  const skeys = ss.map(g.signed);
  assert.deepEqual([...skeys].sort(), skeys);
  assert.throws(() => g.number(-1), RangeError);
  assert.equal(g.number(0), '0'.repeat(20));
  assert.equal(g.number(42), '00000000000000000042');
  assert.equal(g.number(2n ** 64n - 1n), '18446744073709551615');
});

const SAMPLES = ['', '\0', ' ', '!', '"', '#', '$', '%', 'A', 'a', 'a b', 'ab', 'a!', '}', '~', '\x7f', 'é', 'z', 'zz', '€', '😀', 'HOSTILE key\n'];

test('escaping keeps byte order and round-trips', () => {
  for (const a of SAMPLES) {
    const ea = g.escape(a);
    assert.ok(!ea.includes(g.SEPARATOR));
    assert.match(ea, /^[\x21-\x7e]*$/);
    assert.equal(g.unescape(ea), a);
    for (const b of SAMPLES) {
      assert.equal(Buffer.compare(bytes(a), bytes(b)) < 0, ea < g.escape(b), `${JSON.stringify(a)} vs ${JSON.stringify(b)}`);
    }
  }
  assert.equal(g.escape('\0\n é'), '#00#0A#20~C3~A9');
  assert.equal(g.unescape('a b'), undefined);
  assert.equal(g.unescape('#G0'), undefined);
});

test('composites sort part by part', () => {
  assert.ok(g.composite(5, 'a') < g.composite(5, 'ab'));
  assert.ok(g.composite(5, 'ab') < g.composite(5, 'b'));
  assert.ok(g.composite(5, 'zzz') < g.composite(6, 'a'));
  assert.ok(g.composite('a', 'z') < g.composite('ab', 'a'));
  assert.throws(() => g.composite('x'.repeat(257)), RangeError);
  assert.ok(g.composite('x'.repeat(256)));
});

test('subject and deadline', () => {
  assert.equal(g.requireSubject({ principal: { subject: 'alice' } }), 'alice');
  for (const nobody of [{}, { principal: undefined }, { principal: { subject: undefined } }]) {
    assert.throws(() => g.requireSubject(nobody), (e) => e.tag === 'failed');
  }
  assert.equal(g.remainingMs({ deadlineMs: 1500n }, 1000), 500);
  assert.equal(g.remainingMs({ deadlineMs: 1000 }, 2000), 0);
});

test('json encodes a page in the host shape, dropping other properties', async () => {
  const entry = { key: 'k1', resource: { uri: 'x://1', name: 'One', mimeType: 'text/plain', size: 3 }, secret: 'no' };
  const inventory = { list: (after, limit) => ({ entries: [entry, { key: 'k2', resource: { uri: 'x://2', name: 'Two' } }], hasMore: 1 }) };
  const bytes = g.json(inventory).list(undefined, 2, {});
  assert.ok(bytes instanceof Uint8Array);
  assert.deepEqual(JSON.parse(new TextDecoder().decode(bytes)), {
    entries: [
      { key: 'k1', resource: { uri: 'x://1', name: 'One', mimeType: 'text/plain' } },
      { key: 'k2', resource: { uri: 'x://2', name: 'Two' } },
    ],
    hasMore: true,
  });
  const later = { list: async () => ({ entries: [], hasMore: false }) };
  assert.equal(new TextDecoder().decode(await g.json(later).list(undefined, 1, {})), '{"entries":[],"hasMore":false}');
  const failing = { list: () => { throw { tag: 'failed', val: 'down' }; } };
  assert.throws(() => g.json(failing).list(undefined, 1, {}), (e) => e.tag === 'failed');
});
