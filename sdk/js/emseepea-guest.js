// Helpers for emseepea inventory sources written in JavaScript
// (componentize-js / jco). The same helpers as the Rust SDK (sdk/rust):
//
// - page(rows, limit): at most limit + 1 rows taken, { entries, hasMore }
//   with hasMore truthful; fetch(limit) = limit + 1 rows to ask a backend for;
// - json(inventory): the `inventory-json` export of an `inventory` object
//   (world inventory-source-json): the page crosses to the host as UTF-8
//   JSON bytes, encoded natively, several times faster than field by field;
// - keys (1..=256 printable ASCII characters, compared as bytes, which is
//   JavaScript string order for ASCII), all order-preserving: number,
//   signed, timestampMs, escape/unescape for any string, composite(...parts)
//   for a key with a tie-breaker;
// - requireSubject(context): the caller's user id, or throws the
//   `failed` source-error a per-user source must give without one;
// - remainingMs(context): the time left before the call's deadline.
//
// Module state may persist between calls of one caller (the host keeps an
// instance for that caller's next call) and never reaches another caller; do
// not rely on it being empty or kept, and never mix callers' data in it.
// Handles (connections, requests) never persist. See the book: Concepts,
// "Instances".

export const MAX_KEY_LEN = 256;
export const SEPARATOR = '!';

export function fetch(limit) {
  return limit + 1;
}

/** At most `limit` rows of `rows` (any iterable) and whether one more existed. */
export function page(rows, limit) {
  const entries = [];
  for (const row of rows) {
    if (entries.length === limit) {
      return { entries, hasMore: limit > 0 };
    }
    entries.push(row);
  }
  return { entries, hasMore: false };
}

// The page's fields, in the order the host reads them: JSON.stringify
// keeps these (natively) and drops any other property of an entry.
const PAGE_FIELDS = ['entries', 'key', 'resource', 'uri', 'name', 'mimeType', 'hasMore'];

const UTF8 = new TextEncoder();

/** A page ({ entries, hasMore }) as the UTF-8 JSON `inventory-json` returns. */
export function encodePage(page) {
  return UTF8.encode(JSON.stringify({ entries: page.entries, hasMore: Boolean(page.hasMore) }, PAGE_FIELDS));
}

/** The `inventory-json` export of `inventory` (its `list` may be async):
 * `export const inventoryJson = json(inventory);` in a component built with
 * `-n inventory-source-json`. */
export function json(inventory) {
  return {
    list(after, limit, context) {
      const page = inventory.list(after, limit, context);
      return typeof page?.then === 'function' ? page.then(encodePage) : encodePage(page);
    },
  };
}

const U64 = 2n ** 64n;
const I64 = 2n ** 63n;
// Padding by concatenation: String.prototype.padStart is self-hosted
// JavaScript in SpiderMonkey, so in a component (no JIT) it is interpreted,
// op by op, for every key; `slice` is native.
const ZEROS = '00000000000000000000';

/** A non-negative integer below 2^64 (number or BigInt), zero-padded to 20 digits. */
export function number(n) {
  const v = BigInt(n);
  if (v < 0n || v >= U64) {
    throw new RangeError(`${n} is not a u64`);
  }
  return (ZEROS + v.toString()).slice(-20);
}

/** A signed 64-bit integer, offset so negatives sort first. */
export function signed(n) {
  const v = BigInt(n);
  if (v < -I64 || v >= I64) {
    throw new RangeError(`${n} is not an i64`);
  }
  return number(v + I64);
}

/** Unix milliseconds (e.g. Date.now()), fixed width. */
export function timestampMs(ms) {
  return number(ms);
}

const hex = (b) => (b < 16 ? '0' : '') + b.toString(16).toUpperCase();

/** Any string as key characters, keeping UTF-8 byte order: `$`..`}` stay,
 * lower bytes become `#XX`, higher `~XX`; never contains `!`. */
export function escape(s) {
  let out = '';
  for (const b of new TextEncoder().encode(s)) {
    if (b >= 0x24 && b <= 0x7d) {
      out += String.fromCharCode(b);
    } else {
      out += (b <= 0x23 ? '#' : '~') + hex(b);
    }
  }
  return out;
}

/** The inverse of escape; undefined for text it cannot produce. */
export function unescape(key) {
  const bytes = [];
  for (let i = 0; i < key.length; ) {
    const c = key.charCodeAt(i);
    if (key[i] === '#' || key[i] === '~') {
      const h = key.slice(i + 1, i + 3);
      if (!/^[0-9A-F]{2}$/.test(h)) {
        return undefined;
      }
      bytes.push(Number.parseInt(h, 16));
      i += 3;
    } else if (c >= 0x24 && c <= 0x7d) {
      bytes.push(c);
      i += 1;
    } else {
      return undefined;
    }
  }
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(new Uint8Array(bytes));
  } catch {
    return undefined;
  }
}

/** `key` if the host accepts it, else a RangeError. */
export function check(key) {
  if (key.length === 0 || key.length > MAX_KEY_LEN || !/^[\x21-\x7e]+$/.test(key)) {
    throw new RangeError(`not a valid key: ${JSON.stringify(key.slice(0, 40))}`);
  }
  return key;
}

/** A key compared part by part: numbers/BigInts via number(), strings via
 * escape(), joined by `!`. Put the record id last as the tie-breaker. */
export function composite(...parts) {
  return check(
    parts.map((p) => (typeof p === 'number' || typeof p === 'bigint' ? number(p) : escape(String(p)))).join(SEPARATOR),
  );
}

/** The caller's user id, or undefined. */
export function subjectOf(context) {
  return context?.principal?.subject || undefined;
}

/** The caller's user id; throws the `failed` source-error without one. */
export function requireSubject(context) {
  const subject = subjectOf(context);
  if (subject === undefined) {
    throw { tag: 'failed', val: 'A verified user is required' };
  }
  return subject;
}

/** Milliseconds left before context.deadlineMs (0 once passed). */
export function remainingMs(context, nowMs = Date.now()) {
  return Math.max(0, Number(context.deadlineMs) - nowMs);
}
