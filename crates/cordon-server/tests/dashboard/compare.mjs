// The comparison page's browser checks, run by crates/cordon-server/tests/it/dashboard.rs
// (`dashboard_shows_a_comparison_and_each_candidates_report`) against a real `cordon serve`
// holding a session.fork job and a session.compare job of its three forks (the scene, in
// DASHBOARD_SCENE). Debian's chromium, headless, driven by playwright-core. Prints `ok NAME`
// for each check passed, in order; stops at the first failure (`FAIL NAME: why`) and exits 1.
import path from 'node:path';
import { scene, url, open, check } from './harness.mjs';

const { context, page, violations, step } = await open(900);

const text = (selector) => page.textContent(selector).then((t) => (t ?? '').trim());
// The comparison's rows: [session, rank, gate, blocking, new lint, tests, diff, link].
const table = () => page.$$eval('table.compare tbody tr', (trs) => trs.map((tr) => {
  const cell = (label) => tr.querySelector(`[data-label="${label}"]`).textContent.trim();
  return [tr.dataset.candidate, cell('Rank'), cell('Gate'), cell('Blocking findings'),
    cell('New lint findings'), cell('Tests passed'), cell('Diff (lines)'),
    tr.querySelector('[data-label="Session"] a').getAttribute('href')];
}));

try {
  await step('login', async () => {
    await page.goto(url(`/jobs/${scene.compare}`));
    await page.fill('#token', scene.token);
    await Promise.all([page.waitForNavigation(), page.click('form[action="/login"] button')]);
    check(new URL(page.url()).pathname === `/jobs/${scene.compare}`, `the login went to ${page.url()}`);
  });

  await step('ranked-table', async () => {
    const headers = await page.$$eval('table.compare thead th', (ths) => ths.map((th) => th.textContent.trim()));
    const want = ['Rank', 'Session', 'Gate', 'Blocking findings', 'New lint findings', 'Tests passed', 'Diff (lines)', 'Duration', 'Why'];
    check(JSON.stringify(headers) === JSON.stringify(want), `headers: ${JSON.stringify(headers)}`);
    const rows = await table();
    const [good, larger, bad] = scene.ranked;
    check(JSON.stringify(rows.map((r) => r[0])) === JSON.stringify([good, larger, bad]), `order: ${JSON.stringify(rows)}`);
    check(JSON.stringify(rows.map((r) => r[1])) === '["1","2","3"]', `ranks: ${JSON.stringify(rows)}`);
    check(rows[0][2].includes('passed') && rows[1][2].includes('passed') && rows[2][2].includes('blocked'), `gates: ${JSON.stringify(rows)}`);
    check(+rows[2][3] >= 1 && rows[0][3] === '0', `blocking findings: ${JSON.stringify(rows)}`);
    check(+rows[0][6] < +rows[1][6], `diff sizes: ${JSON.stringify(rows)}`);
    check((await text(`tr[data-candidate="${bad}"] td.msg`)).includes('blocked by check'), 'no reason for the failure');
    check((await text('dl.facts')).includes(good), 'the winner is not named');
    check((await text('.job-head .state')).includes('succeeded'), 'the job is not shown as succeeded');
    await page.screenshot({ path: path.join(scene.shots, 'job-compare.png'), fullPage: true });
  });

  await step('candidate-links', async () => {
    const rows = await table();
    for (const [id, , gate, , , , , href] of rows) {
      check(href === `/jobs/${scene.compare}/candidates/${id}`, `link of ${id}: ${href}`);
      await page.goto(url(href));
      check((await text('h1')).includes(id), `the page of ${id} is not about it`);
      const stages = await page.$$eval('details.stage', (ds) => ds.map((d) => d.dataset.stage));
      check(JSON.stringify(stages) === '["check"]', `stages of ${id}: ${JSON.stringify(stages)}`);
      if (gate.includes('blocked')) {
        check((await text('.verdict')).includes('blocked'), `${id}: no blocked verdict`);
        check((await text('details.stage[data-stage="check"] pre.tail')).includes('RESULT is bad'), `${id}: the failing stage's output is not shown`);
        check((await text('section.failure')).includes('check'), `${id}: no blocking stage`);
      } else {
        check((await text('.verdict')).includes('allowed'), `${id}: no allowed verdict`);
      }
      await Promise.all([page.waitForNavigation(), page.click('p.crumbs a')]);
      check(new URL(page.url()).pathname === `/jobs/${scene.compare}`, `back went to ${page.url()}`);
    }
    const missing = await page.request.get(url(`/jobs/${scene.compare}/candidates/s-nonesuch`));
    check(missing.status() === 404, `an unknown candidate answered ${missing.status()}`);
    const notCompare = await page.request.get(url(`/jobs/${scene.fork}/candidates/${scene.ranked[0]}`));
    check(notCompare.status() === 404, `a fork job's candidate answered ${notCompare.status()}`);
  });

  await step('fork-sessions', async () => {
    await page.goto(url(`/jobs/${scene.fork}`));
    const listed = await page.$$eval('table.forks tbody tr', (trs) => trs.map((tr) => tr.dataset.session));
    check(JSON.stringify(listed) === JSON.stringify(scene.forks), `forks: ${JSON.stringify(listed)}`);
    check((await text('dl.facts')).includes(scene.source), 'the source session is not named');
  });

  await step('waiting-reason', async () => {
    await page.goto(url(`/jobs/${scene.waiting}`));
    check((await text('.job-head .state')).includes('queued'), 'the waiting compare is not queued');
    const why = await text('p.waiting');
    check(why.includes('runs 2 verifications at once') && why.includes('starts when 2 are free'), `waiting: ${why}`);
    check((await text('dl.facts')).includes('2 sessions, 2 verified at once'), 'the candidates are not described');
  });

  await step('no-csp-violations', async () => {
    check(violations.length === 0, `violations: ${JSON.stringify(violations)}`);
  });
} catch (_) {
  process.exitCode = 1;
} finally {
  await context.close();
}
