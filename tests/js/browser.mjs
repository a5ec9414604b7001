// Headless Chromium for tests, driven by playwright-core with Debian's /usr/bin/chromium
// (never a downloaded browser; see /work/shared/TOOLCHAIN.md).
//
//   const browser = await launchBrowser();          // throws BrowserUnavailableError if no Chromium
//   const { page, errors } = await openPage(browser, url);
//   ... assert.deepEqual(errors, []) ...
//   await browser.close();                           // also removes the temp profile dir (Playwright)
import { existsSync } from 'node:fs';

export const chromiumPath = process.env.QKV_CHROMIUM || '/usr/bin/chromium';

/** Flags from TOOLCHAIN.md: headless, no sandbox (root/containers), no network chatter, WebGPU on SwiftShader. */
export const chromiumArgs = [
  '--headless=new',
  '--no-sandbox',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--enable-unsafe-webgpu',
  // Chromium keeps only the last --enable-features switch, and Playwright passes its own
  // (CDPScreenshotNewSurface, and SkipListAccountsWithoutGaiaCookies, which stops an
  // accounts.google.com request at start); ours comes last, so it repeats them.
  '--enable-features=Vulkan,CDPScreenshotNewSurface,SkipListAccountsWithoutGaiaCookies',
  '--use-vulkan=swiftshader',
  '--use-webgpu-adapter=swiftshader',
];

export class BrowserUnavailableError extends Error {
  name = 'BrowserUnavailableError';
}

/** True if the Chromium binary exists (tests skip when it does not). */
export const haveChromium = existsSync(chromiumPath);

/** Why a browser cannot be launched here, or null if it can. */
export async function browserUnavailableReason() {
  if (!existsSync(chromiumPath)) {
    return `Chromium not found at ${chromiumPath} (install it: apt-get install chromium, or run scripts/setup.sh)`;
  }
  try {
    await import('playwright-core');
  } catch {
    return 'npm package playwright-core is not installed (run npm install or scripts/setup.sh)';
  }
  return null;
}

/**
 * Launches headless Chromium (a playwright Browser). Extra Chromium args may be passed in
 * opts.args. The fresh --user-data-dir: Playwright refuses that flag in `args` for
 * chromium.launch(); it always creates a fresh temp profile itself
 * ($TMPDIR/playwright_chromiumdev_profile-*), passes it as --user-data-dir and deletes it on
 * browser.close() and on process exit, as it kills the browser then too. Always close the browser
 * (try/finally or t.after).
 */
export async function launchBrowser(opts = {}) {
  const reason = await browserUnavailableReason();
  if (reason) throw new BrowserUnavailableError(reason);
  const { chromium } = await import('playwright-core');
  return chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    chromiumSandbox: false,
    // Playwright's own headless flag is plain --headless; we pass TOOLCHAIN's --headless=new.
    ignoreDefaultArgs: ['--headless'],
    args: [...chromiumArgs, ...(opts.args || [])],
    timeout: opts.timeout ?? 30000,
    env: { ...process.env, ...(opts.env || {}) },
  });
}

/**
 * Opens url in a new context/page. Returns { page, context, errors, messages } where errors
 * collects console.error messages, uncaught page errors and failed requests, and messages
 * collects every console line ("type: text"). Closing the browser closes the page.
 */
export async function openPage(browser, url, opts = {}) {
  const context = await browser.newContext(opts.context || {});
  const page = await context.newPage();
  const errors = [];
  const messages = [];
  page.on('console', (msg) => {
    const line = `${msg.type()}: ${msg.text()}`;
    messages.push(line);
    if (msg.type() === 'error') errors.push(`console.${line}`);
  });
  page.on('pageerror', (err) => errors.push(`pageerror: ${err.stack || err.message || err}`));
  page.on('requestfailed', (req) => {
    errors.push(`requestfailed: ${req.url()} ${req.failure()?.errorText ?? ''}`);
  });
  page.on('crash', () => errors.push('crash: page crashed'));
  if (url) await page.goto(url, { waitUntil: opts.waitUntil || 'load', timeout: opts.timeout ?? 30000 });
  return { page, context, errors, messages };
}
