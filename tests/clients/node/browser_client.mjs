// A real browser as an MCP client: headless Chromium driven by puppeteer-core.
// usage: node browser_client.mjs bundle OUTDIR
//          (esbuild bundles browser/page.mjs to OUTDIR/page.js)
//        node browser_client.mjs run CHROMIUM PAGE_URL
//          (opens PAGE_URL, waits for the page's outcome, prints one JSON object)
import * as esbuild from 'esbuild';
import puppeteer from 'puppeteer-core';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [mode, ...args] = process.argv.slice(2);
if (mode === 'bundle') {
  await esbuild.build({
    entryPoints: [new URL('./browser/page.mjs', import.meta.url).pathname],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    outfile: join(args[0], 'page.js'),
    logLevel: 'error',
  });
  console.log(JSON.stringify({ bundled: true }));
} else {
  const [chromium, pageUrl] = args;
  const browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    userDataDir: mkdtempSync(join(tmpdir(), 'emseepea-chromium-')),
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
  });
  try {
    const page = await browser.newPage();
    const console_ = [];
    page.on('console', (m) => console_.push(m.text()));
    await page.goto(pageUrl);
    await page.waitForFunction(() => window.RESULT !== undefined, { timeout: 60000 });
    const result = await page.evaluate(() => window.RESULT);
    result.console = console_;
    console.log(JSON.stringify(result));
  } finally {
    await browser.close();
  }
}
