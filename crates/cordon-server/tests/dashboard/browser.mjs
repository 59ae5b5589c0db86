// The dashboard's browser checks, run by crates/cordon-server/tests/it/dashboard.rs against a
// real `cordon serve` it prepared (the scene: URL, tokens, job ids, in DASHBOARD_SCENE).
// Debian's chromium, headless, driven by playwright-core. Prints `ok NAME` for each check
// passed, in order; stops at the first failure (`FAIL NAME: why`, a screenshot beside the
// others) and exits 1.
import path from 'node:path';
import { scene, url, open, check } from './harness.mjs';

const J = scene.jobs;
const T = scene.tokens;
const { context, page, dialogs, violations, step } = await open(800);

async function api(method, p, token, body) {
  const response = await fetch(url(p), {
    method,
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, body: await response.json() };
}

async function login(token) {
  await context.clearCookies();
  await page.goto(url('/login'));
  await page.fill('#token', token);
  await Promise.all([page.waitForNavigation(), page.click('form[action="/login"] button')]);
  check(!page.url().includes('/login'), `the login with a good token stayed at ${page.url()}`);
}

const text = (selector) => page.textContent(selector).then((t) => (t ?? '').trim());
const rowState = (id) => page.getAttribute(`tr[data-job="${id}"]`, 'data-state', { timeout: 2000 }).catch(() => null);
const rows = () => page.$$eval('#jobs-live tr[data-job]', (trs) => trs.map((tr) => [tr.dataset.job, tr.dataset.state]));
const maxTick = () => page.$eval('#log', (log) => Math.max(0, ...[...log.textContent.matchAll(/tick (\d+)/g)].map((m) => +m[1])));
const csrfOfPage = () => page.getAttribute('form[action="/logout"] input[name="csrf"]', 'value');
const post = (p, fields) => page.evaluate(async ([p, fields]) => {
  const response = await fetch(p, { method: 'POST', body: new URLSearchParams(fields), redirect: 'manual' });
  return response.status;
}, [p, fields]);
const noOverflow = () => page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth);

try {
  await step('login-required', async () => {
    await page.goto(url('/'));
    check(new URL(page.url()).pathname === '/login', `/ did not ask for a login: ${page.url()}`);
    await page.goto(url(`/jobs/${J.fail}`));
    check(page.url().endsWith(`/login?next=%2Fjobs%2F${J.fail}`), `no way back after the login: ${page.url()}`);
    for (const p of ['/fragments/jobs', `/jobs/${J.fail}/live`, `/jobs/${J.fail}/summary`]) {
      const response = await page.request.get(url(p), { maxRedirects: 0 });
      check(response.status() === 401, `${p} without a login answered ${response.status()}`);
    }
    for (const p of [`/jobs/${J.fail}/download/report.json`, '/projects', '/sessions']) {
      const response = await page.request.get(url(p), { maxRedirects: 0 });
      check(response.status() === 303, `${p} without a login answered ${response.status()}`);
    }
    await page.fill('#token', `cdn_${'0'.repeat(48)}`);
    const [response] = await Promise.all([
      page.waitForResponse((r) => r.url().endsWith('/login') && r.request().method() === 'POST'),
      page.click('form[action="/login"] button'),
    ]);
    check(response.status() === 401, `a bad token answered ${response.status()}`);
    check((await text('.error')).includes('not valid'), 'no error for a bad token');
  });

  await step('login', async () => {
    // The form kept where to go: the failed job's page.
    await page.fill('#token', T.web);
    await Promise.all([page.waitForNavigation(), page.click('form[action="/login"] button')]);
    check(new URL(page.url()).pathname === `/jobs/${J.fail}`, `the login went to ${page.url()}`);
    const cookie = (await context.cookies()).find((c) => c.name === 'cordon_dash');
    check(cookie && cookie.httpOnly && cookie.sameSite === 'Strict', `cookie flags: ${JSON.stringify(cookie)}`);
    check(!(await page.evaluate(() => document.cookie)).includes('cordon_dash'), 'scripts can read the login cookie');
  });

  await step('jobs-table', async () => {
    await page.goto(url('/'));
    const want = { [J.pass]: 'succeeded', [J.fail]: 'failed', [J.probe]: 'failed', [J.long]: 'running', [J.clone_pass]: 'succeeded' };
    for (const [id, state] of Object.entries(want)) {
      check(await rowState(id) === state, `job ${id}: ${await rowState(id)}, not ${state}`);
      check((await text(`tr[data-job="${id}"] .state`)).includes(state), `job ${id}'s badge does not say ${state}`);
    }
    const ids = (await rows()).map(([id]) => id);
    check(!ids.includes(J.other) && !ids.includes(J.odd), 'another project\'s jobs are listed');
    check(ids.indexOf(J.long) < ids.indexOf(J.pass), 'not newest first');
    check((await text(`tr[data-job="${J.fail}"] td[data-label="Outcome"]`)).includes('test'), 'no failure category');
  });

  await step('security-headers', async () => {
    const response = await page.goto(url('/'));
    const headers = response.headers();
    const csp = headers['content-security-policy'] ?? '';
    check(csp.includes("script-src 'self'") && csp.includes("frame-ancestors 'none'") && !csp.includes('unsafe'), `CSP: ${csp}`);
    check(headers['x-content-type-options'] === 'nosniff', 'no nosniff');
    check(headers['cache-control'] === 'no-store', 'pages may be cached');
  });

  await step('filters', async () => {
    await Promise.all([page.waitForURL(/state=failed/), page.selectOption('#f-state', 'failed')]);
    const failed = await rows();
    check(failed.every(([, state]) => state === 'failed'), `state filter: ${JSON.stringify(failed)}`);
    check(failed.some(([id]) => id === J.fail) && failed.some(([id]) => id === J.probe), 'failed jobs missing');
    await Promise.all([page.waitForURL(/type=verify/), page.selectOption('#f-type', 'verify')]);
    const verifies = await rows();
    check(JSON.stringify(verifies) === JSON.stringify([[J.fail, 'failed']]), `state+type filter: ${JSON.stringify(verifies)}`);
  });

  await step('live-table', async () => {
    await page.goto(url('/'));
    await page.evaluate(() => { window.stillThisPage = true; });
    const fresh = await api('POST', '/v1/jobs', T.web, {
      project: 'web', type: 'run', inputs: { argv: ['sh', '-c', 'sleep 1; echo fresh'] },
    });
    check(fresh.status === 201, `submit: ${JSON.stringify(fresh)}`);
    await page.waitForSelector(`tr[data-job="${fresh.body.id}"]`, { timeout: 15000 });
    await page.waitForSelector(`tr[data-job="${fresh.body.id}"][data-state="succeeded"]`, { timeout: 30000 });
    check(await page.evaluate(() => window.stillThisPage === true), 'the page reloaded');
  });

  await step('failed-job', async () => {
    await page.setViewportSize({ width: 1280, height: 1100 });
    await page.goto(url(`/jobs/${J.fail}`));
    check((await text('.job-head .state')).includes('failed'), 'the header does not say failed');
    const stages = await page.$$eval('ol.timeline li[data-stage]', (lis) => lis.map((li) => [li.dataset.stage, li.dataset.status]));
    check(JSON.stringify(stages) === JSON.stringify([['python-compile', 'pass'], ['pytest', 'fail']]), `timeline: ${JSON.stringify(stages)}`);
    check(await page.$('ol.timeline rect.bar-fail') && await page.$('ol.timeline rect.bar-pass'), 'no coloured bars');
    check(/\d/.test(await text('ol.timeline li[data-stage="pytest"] .took')), 'no duration');
    check(await text('table.findings td.test') === 'tests/test_demo.py::test_add', 'the failing test is not named');
    check(await text('table.findings td.where') === 'tests/test_demo.py:7', 'no file:line');
    check(await page.isVisible('table.findings td.test'), 'the failing test is not visible');
    check((await text('.verdict')).includes('blocked'), 'no promotion verdict');
    check(/^[0-9a-f]{12}$/.test(await text('dl.facts code[title]')), 'no commit');
    await page.waitForFunction(() => document.getElementById('log-status').textContent === 'ended: failed');
    check((await text('#log')).includes('1 failed, 1 passed'), 'the log is not shown');
    await page.screenshot({ path: path.join(scene.shots, 'job-failed.png') });
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  await step('downloads', async () => {
    const get = async (file) => {
      const href = await page.getAttribute(`a[href$="/download/${file}"]`, 'href');
      const response = await page.request.get(url(href));
      check(response.status() === 200, `${file}: ${response.status()}`);
      check((response.headers()['content-disposition'] ?? '').startsWith('attachment'), `${file} is not an attachment`);
      return response.text();
    };
    check(JSON.parse(await get('report.json')).schema === 'cordon.run-report/v1', 'report.json');
    check(JSON.parse(await get('job.json')).schema === 'cordon.job/v1', 'job.json');
    const junit = await get('report.xml');
    check(junit.includes('<testsuite') && junit.includes('<failure'), 'report.xml is not JUnit with a failure');
    check((await get('report.md')).includes('blocked'), 'report.md');
    check((await get('log.txt')).includes('FAILED tests/test_demo.py::test_add'), 'log.txt');
  });

  await step('xss', async () => {
    check((await text('table.findings td.msg')).includes(scene.probe), 'the probe is not shown as text');
    check(await page.evaluate(() => document.scripts.length) === 1, 'a script element came from data');
    await page.goto(url(`/jobs/${J.probe}`));
    await page.waitForFunction((probe) => document.getElementById('log').textContent.includes(probe), scene.probe);
    check((await text('dl.facts')).includes(scene.probe), 'the idempotency key is not shown as text');
    check(await page.evaluate(() => document.scripts.length) === 1, 'a script element came from the log');
  });

  await step('live-log', async () => {
    await page.goto(url(`/jobs/${J.long}`));
    await page.waitForFunction(() => /tick \d+/.test(document.getElementById('log').textContent));
    const first = await maxTick();
    await page.waitForFunction((n) => Math.max(0, ...[...document.getElementById('log').textContent
      .matchAll(/tick (\d+)/g)].map((m) => +m[1])) >= n + 10, first);
    check(await text('#log-status') === 'live', `log status: ${await text('#log-status')}`);
    // It follows the end while the reader is there...
    await page.waitForFunction(() => {
      const log = document.getElementById('log');
      return log.scrollHeight > log.clientHeight && log.scrollHeight - log.scrollTop - log.clientHeight < 10;
    });
    // ...and stops following when the reader scrolls up.
    await page.$eval('#log', (log) => { log.scrollTop = 0; });
    await page.waitForSelector('#log-jump', { state: 'visible' });
    const before = await maxTick();
    await page.waitForFunction((n) => Math.max(0, ...[...document.getElementById('log').textContent
      .matchAll(/tick (\d+)/g)].map((m) => +m[1])) >= n + 5, before);
    check(await page.$eval('#log', (log) => log.scrollTop) < 5, 'the log jumped while the reader scrolled up');
    await page.click('#log-jump');
    await page.waitForFunction(() => {
      const log = document.getElementById('log');
      return log.scrollHeight - log.scrollTop - log.clientHeight < 10;
    });
  });

  await step('other-project-hidden', async () => {
    const response = await page.goto(url(`/jobs/${J.other}`));
    check(response.status() === 404, `another project's job answered ${response.status()}`);
    const live = await page.request.get(url(`/jobs/${J.other}/live`));
    check(live.status() === 404, `its live log answered ${live.status()}`);
    await page.goto(url('/?project=other'));
    check(await page.$('td.empty'), 'a project token lists another project');
  });

  await step('csrf', async () => {
    await page.goto(url(`/jobs/${J.long}`));
    check(await post(`/jobs/${J.long}/cancel`, { csrf: 'forged' }) === 403, 'a cancel without the CSRF token went through');
    // With the right CSRF token but from another site.
    const cookie = (await context.cookies()).find((c) => c.name === 'cordon_dash');
    const forged = await fetch(url(`/jobs/${J.long}/cancel`), {
      method: 'POST',
      redirect: 'manual',
      headers: { Cookie: `cordon_dash=${cookie.value}`, Origin: 'http://evil.example', 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ csrf: await csrfOfPage() }),
    });
    check(forged.status === 403, `a cross-site cancel answered ${forged.status}`);
    check((await api('GET', `/v1/jobs/${J.long}`, T.web)).body.state === 'running', 'the job was cancelled');
  });

  await step('read-only-cannot-cancel', async () => {
    await login(T.read_only);
    await page.goto(url(`/jobs/${J.long}`));
    check(!(await page.$('form.cancel')), 'a read-only token gets a cancel button');
    check(await post(`/jobs/${J.long}/cancel`, { csrf: await csrfOfPage() }) === 403, 'a read-only token cancelled');
    check((await api('GET', `/v1/jobs/${J.long}`, T.web)).body.state === 'running', 'the job was cancelled');
  });

  await step('operator-jobs', async () => {
    await login(T.operator);
    await page.goto(url('/'));
    const ids = (await rows()).map(([id]) => id);
    for (const id of [J.other, J.odd, J.fail, J.long]) check(ids.includes(id), `the operator does not see ${id}`);
    check((await text(`tr[data-job="${J.odd}"] td[data-label="Project"]`)) === scene.hostile_project, 'the hostile project name is not text');
    check(await page.$$eval('main img', (imgs) => imgs.length) === 0, 'an image came from a project name');
    check((await text('header .who')).includes('Operator'), 'not shown as an operator');
    await page.screenshot({ path: path.join(scene.shots, 'jobs.png') });
    await page.goto(url('/?project=other'));
    const other = await rows();
    check(JSON.stringify(other.map(([id]) => id)) === JSON.stringify([J.other]), `project filter: ${JSON.stringify(other)}`);
  });

  await step('contrast', async () => {
    // WCAG 2 contrast of every text element on the jobs page against its effective
    // background: at least 4.5:1.
    await page.goto(url('/'));
    const low = await page.evaluate(() => {
      const rgb = (text) => (text.match(/[\d.]+/g) || []).map(Number);
      const luminance = ([r, g, b]) => {
        const c = [r, g, b].map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
        return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
      };
      const background = (el) => {
        for (; el; el = el.parentElement) {
          const [r, g, b, a = 1] = rgb(getComputedStyle(el).backgroundColor);
          if (a > 0.5) return [r, g, b];
        }
        return [255, 255, 255];
      };
      const found = [];
      for (const el of document.querySelectorAll('body *')) {
        const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
        if (!own || !el.getClientRects().length || el.closest('.skip, .sr-only')) continue;
        const a = luminance(rgb(getComputedStyle(el).color));
        const b = luminance(background(el));
        const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
        if (ratio < 4.5) found.push(`${el.tagName}.${el.className}: ${ratio.toFixed(2)}`);
      }
      return found;
    });
    check(low.length === 0, `low contrast: ${low.join(', ')}`);
  });

  await step('operator-projects', async () => {
    await page.goto(url('/projects'));
    const web = 'tr[data-project="web"]';
    check((await text(`${web} td[data-label="Running"]`)).includes('1 / 3'), `web running: ${await text(`${web} td[data-label="Running"]`)}`);
    check(await page.$$eval(`${web} meter`, (meters) => meters.length) === 2, 'no concurrency and budget bars');
    check((await text(`${web} td[data-label="Budget"]`)).includes('of 2 h 00 min'), 'no budget');
    const failures = await text(`${web} td[data-label="Failures"]`);
    check(failures.includes('test × 1') && failures.includes('exit × 1'), `failure categories: ${failures}`);
    check(await page.$('tr[data-project="other"]'), 'project other is missing');
  });

  await step('operator-sessions', async () => {
    await page.goto(url('/sessions'));
    const session = `article.session[data-session="${scene.session}"]`;
    await page.waitForSelector(session);
    check(/\d/.test(await text(`${session} .idle-left`)), 'no idle time left');
    check((await text(`${session} table.rounds tbody`)).includes('handled 1'), 'no round with the fixer outcome');
    check((await text(`${session} ul.items`)).includes(scene.probe), 'the waiting item is not shown as text');
    check(await page.evaluate(() => document.scripts.length) === 1, 'a script element came from a session');
  });

  await step('phone-width', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    for (const p of ['/', `/jobs/${J.fail}`, '/projects', '/sessions']) {
      await page.goto(url(p));
      check(await noOverflow(), `${p} is wider than a phone`);
    }
    await page.goto(url('/'));
    check(await page.$eval('#jobs-live tbody tr', (tr) => getComputedStyle(tr).display) === 'block', 'rows are not cards on a phone');
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  await step('keyboard', async () => {
    await page.goto(url('/'));
    await page.keyboard.press('Tab');
    check(await page.evaluate(() => document.activeElement.textContent) === 'Skip to the content', 'the first tab stop is not the skip link');
    check(await page.evaluate(() => document.activeElement.getBoundingClientRect().top >= 0), 'the skip link is not on screen');
    await page.keyboard.press('Enter');
    await page.keyboard.press('Tab');
    const focused = await page.evaluate(() => {
      const el = document.activeElement;
      return { inMain: !!el.closest('main'), outline: getComputedStyle(el).outlineStyle };
    });
    check(focused.inMain && focused.outline !== 'none', `after the skip link: ${JSON.stringify(focused)}`);
  });

  await step('cancel', async () => {
    await login(T.web);
    await page.goto(url(`/jobs/${J.long}`));
    await Promise.all([page.waitForNavigation(), page.click('form.cancel button')]);
    await page.waitForFunction(() => document.querySelector('.job-head .state').textContent.includes('cancelled'), null, { timeout: 30000 });
    // The live log's status comes by its own stream, a moment after the page's state: wait for
    // it too (a check right away failed once, its message then reading the awaited text).
    await page.waitForFunction(() => document.getElementById('log-status').textContent.trim() === 'ended: cancelled', null, { timeout: 30000 })
      .catch(() => {});
    check(await text('#log-status') === 'ended: cancelled', `log status: ${await text('#log-status')}`);
    check(!(await page.$('form.cancel')), 'a cancelled job still has a cancel button');
    check((await api('GET', `/v1/jobs/${J.long}`, T.web)).body.state === 'cancelled', 'the API does not say cancelled');
  });

  await step('logout', async () => {
    const cookie = (await context.cookies()).find((c) => c.name === 'cordon_dash');
    await Promise.all([page.waitForNavigation(), page.click('form[action="/logout"] button')]);
    check(new URL(page.url()).pathname === '/login', `after the logout: ${page.url()}`);
    await page.goto(url('/'));
    check(new URL(page.url()).pathname === '/login', 'still logged in');
    const again = await fetch(url('/'), { redirect: 'manual', headers: { Cookie: `cordon_dash=${cookie.value}` } });
    check(again.status === 303, `the old cookie still works: ${again.status}`);
  });

  await step('no-dialogs-no-csp-violations', async () => {
    check(dialogs.length === 0, `dialogs: ${JSON.stringify(dialogs)}`);
    check(violations.length === 0, `violations: ${JSON.stringify(violations)}`);
  });
} catch (_) {
  process.exitCode = 1;
} finally {
  await context.close();
}
