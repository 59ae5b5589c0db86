// What the dashboard's browser scripts share (browser.mjs, compare.mjs): the scene a test in
// crates/cordon-server/tests/it/dashboard.rs prepared (DASHBOARD_SCENE), Debian's chromium
// launched headless through playwright-core with a fresh profile, the page's dialogs and
// Content Security Policy violations collected, and `step`, which prints `ok NAME` for a check
// passed or `FAIL NAME: why` with a screenshot beside the others, and rethrows.
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

export const scene = JSON.parse(process.env.DASHBOARD_SCENE);
export const url = (p) => scene.url + p;

const { chromium } = await import(pathToFileURL(path.join(scene.playwright, 'index.mjs')).href);

/** Opens the browser (a fresh profile for every run) with a viewport `height` pixels tall. */
export async function open(height) {
  fs.rmSync(scene.profile, { recursive: true, force: true });
  fs.mkdirSync(scene.profile, { recursive: true });
  const context = await chromium.launchPersistentContext(scene.profile, {
    executablePath: scene.chromium,
    headless: true,
    args: [
      '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-quic',
    ],
    viewport: { width: 1280, height },
  });
  context.setDefaultTimeout(20000);
  const page = context.pages()[0] ?? await context.newPage();
  const dialogs = [];
  const violations = [];
  page.on('dialog', (dialog) => { dialogs.push(dialog.message()); dialog.dismiss(); });
  page.on('console', (message) => {
    if (/Content Security Policy|Refused to/i.test(message.text())) violations.push(message.text());
  });
  page.on('pageerror', (error) => violations.push(`page error: ${error.message}`));
  const step = async (name, body) => {
    try {
      await body();
      console.log(`ok ${name}`);
    } catch (error) {
      console.log(`FAIL ${name}: ${error.stack || error}`);
      await page.screenshot({ path: path.join(scene.shots, `failure-${name}.png`), fullPage: true }).catch(() => {});
      throw error;
    }
  };
  return { context, page, dialogs, violations, step };
}

export function check(condition, message) {
  if (!condition) throw new Error(message);
}
