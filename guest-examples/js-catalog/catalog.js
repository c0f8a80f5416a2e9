// js-catalog: the catalog source in JavaScript, on the SDK (sdk/js), bundled
// with esbuild and built with componentize-js (`npm run build`).
// A deterministic catalog of N items (manifest config `items`, default 500):
// `list` computes only the requested slice, in a plain loop (in an
// interpreter every call and iterator step counts: a generator feeding
// sdk.page cost a third of the call); keys are zero-padded so string order
// is numeric order.
//
// With `details_url` in its config (and that origin granted in the manifest's
// `[grants] http`), `read` fetches an item's text from that backend: GET
// DETAILS_URL/KEY, with the caller's subject in `x-caller`.
//
// It exports its listing as `inventory-json` (world inventory-source-json):
// sdk.json turns the `inventory` object's pages into JSON, which crosses to
// the host as one string instead of field by field in interpreted code.
import { get } from 'emseepea:inventory/config@0.1.0';
import * as sdk from '../../sdk/js/emseepea-guest.js';

const NAME = 'js-catalog';
const PREFIX = 'jscat://items/';
const WIDTH = 10;

// The manifest's config is fixed for the instance's life: read it once.
let itemCount;
function items() {
  if (itemCount === undefined) {
    const n = Number.parseInt(get('items') ?? '500', 10);
    itemCount = Number.isFinite(n) && n >= 0 ? n : 500;
  }
  return itemCount;
}

// Not padStart: it is self-hosted JavaScript in SpiderMonkey, interpreted
// here op by op (a third of a page's instructions); `slice` is native.
function key(n) {
  return ('0000000000' + n).slice(-WIDTH);
}

async function fetchDetails(base, id, context) {
  let response;
  try {
    response = await fetch(`${base}/${id}`, { headers: { 'x-caller': context.principal?.subject ?? '' } });
  } catch (e) {
    throw { tag: 'failed', val: `details backend unreachable: ${e}` };
  }
  if (response.status === 404) {
    throw { tag: 'not-found' };
  }
  if (!response.ok) {
    throw { tag: 'failed', val: `details backend answered ${response.status}` };
  }
  return await response.text();
}

export const template = {
  describe() {
    return {
      name: NAME,
      uriTemplate: `${PREFIX}{id}`,
      title: 'JavaScript catalog',
      description: `A deterministic catalog of ${items()} items, served by a JavaScript guest`,
      mimeType: 'text/plain',
      access: 'protected',
      requiredScopes: [get('scope') ?? 'catalog:read'],
      discoverable: true,
    };
  },

  // Async so that it can await `fetch`: componentize-js runs the event loop
  // until the returned promise settles.
  async read(uri, context) {
    const id = uri.startsWith(PREFIX) ? uri.slice(PREFIX.length) : '';
    const n = /^[0-9]{10}$/.test(id) ? Number.parseInt(id, 10) : 0;
    if (n < 1 || n > items()) {
      throw { tag: 'not-found' };
    }
    const details = get('details_url');
    const text = details === undefined ? `Item ${n} of the JavaScript catalog.\n` : await fetchDetails(details, id, context);
    return [{ uri, mimeType: 'text/plain', body: { tag: 'text', val: text } }];
  },
};

export const inventory = {
  list(after, limit, _context) {
    let first = 1;
    if (after !== undefined) {
      if (!/^[0-9]{10}$/.test(after)) {
        throw { tag: 'failed', val: `not a catalog key: ${after}` };
      }
      first = Number.parseInt(after, 10) + 1;
    }
    const total = items();
    const last = Math.min(total, first + limit - 1);
    const entries = [];
    for (let n = first; n <= last; n++) {
      const k = key(n);
      entries.push({ key: k, resource: { uri: PREFIX + k, name: 'JS item ' + n, mimeType: 'text/plain' } });
    }
    // Truthful: more exist exactly when the slice stopped short of the end.
    return { entries, hasMore: entries.length > 0 && last < total };
  },
};

export const inventoryJson = sdk.json(inventory);
