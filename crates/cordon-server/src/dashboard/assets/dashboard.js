// cordon dashboard: the live parts of server-rendered pages. No framework and no build step;
// served from the binary (CSP: script-src 'self'). Everything the server sends is HTML it
// escaped; text from the live log is only ever set with textContent.
'use strict';

(function () {
  // Escape sequences and control characters (but newline and tab) of program output.
  const CONTROLS = /\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[PX^_][^\x1b]*(?:\x1b\\)?|[ -/]*[0-~])|[\x00-\x08\x0b-\x1f\x7f-\x9f]/g;
  const clean = (text) => text.replace(CONTROLS, '');

  // A server-rendered fragment, or null; a lost login reloads the page (to the login form).
  async function fragment(url) {
    try {
      const response = await fetch(url, { credentials: 'same-origin', cache: 'no-store' });
      if (response.status === 401) {
        location.reload();
        return null;
      }
      return response.ok ? await response.text() : null;
    } catch (_) {
      return null;
    }
  }

  // Replaces an element's content, keeping the keyboard focus on the same link if it is
  // still there.
  function swap(element, html) {
    const focused = document.activeElement;
    const href = focused && element.contains(focused) ? focused.getAttribute('href') : null;
    element.innerHTML = html;
    if (href) {
      const again = Array.from(element.querySelectorAll('a[href]')).find((a) => a.getAttribute('href') === href);
      if (again) again.focus();
    }
  }

  // The jobs table's first page: fetched again every two seconds while the tab is visible.
  function liveTable(element) {
    let last = null;
    const tick = async () => {
      if (!document.hidden) {
        const html = await fragment(element.dataset.refresh);
        if (html !== null && html !== last) {
          if (last !== null) swap(element, html);
          last = html;
        }
      }
      setTimeout(tick, 2000);
    };
    tick();
  }

  // Filters apply as soon as a choice changes (the Filter button stays for typed input).
  function autosubmit(form) {
    form.querySelectorAll('select').forEach((select) => {
      select.addEventListener('change', () => form.requestSubmit());
    });
  }

  // A job's page: the log follows the job's events; the summary above it is fetched again
  // when a stage or the state changes.
  function liveLog(log) {
    const status = document.getElementById('log-status');
    const jump = document.getElementById('log-jump');
    const summary = document.getElementById('job-summary');
    const live = summary && summary.dataset.final === 'false';
    const MAX_CHARS = 2000000;
    let follow = true;
    let chars = 0;

    const atEnd = () => log.scrollHeight - log.scrollTop - log.clientHeight < 8;
    log.addEventListener('scroll', () => {
      follow = atEnd();
      jump.hidden = follow;
    });
    jump.addEventListener('click', () => {
      follow = true;
      jump.hidden = true;
      log.scrollTop = log.scrollHeight;
      log.focus();
    });

    // One fetch at a time, a quarter second after the first change; a change seen while a
    // fetch runs fetches again after it (so the last state is never missed).
    let timer = null;
    let fetching = false;
    let again = false;
    const refresh = () => {
      if (!live) return;
      if (fetching) {
        again = true;
        return;
      }
      if (timer) return;
      timer = setTimeout(async () => {
        timer = null;
        fetching = true;
        const html = await fragment(summary.dataset.summary);
        fetching = false;
        if (html !== null) swap(summary, html);
        if (again) {
          again = false;
          refresh();
        }
      }, 250);
    };

    const source = new EventSource(log.dataset.events);
    status.textContent = 'connecting…';
    source.addEventListener('open', () => { status.textContent = live ? 'live' : 'replaying'; });
    source.addEventListener('output', (event) => {
      // Where the reader is now (a scroll may not have reached its event yet).
      const stick = follow && atEnd();
      const data = JSON.parse(event.data);
      const piece = document.createElement('span');
      if (data.stream === 'stderr') piece.className = 'stderr';
      piece.textContent = clean(String(data.text || ''));
      log.appendChild(piece);
      chars += piece.textContent.length;
      while (chars > MAX_CHARS && log.firstChild) {
        chars -= log.firstChild.textContent.length;
        log.removeChild(log.firstChild);
      }
      if (stick) log.scrollTop = log.scrollHeight;
    });
    source.addEventListener('stage', refresh);
    source.addEventListener('state', refresh);
    source.addEventListener('end', (event) => {
      source.close();
      const data = JSON.parse(event.data);
      status.textContent = 'ended: ' + String(data.state || '');
      refresh();
    });
    source.addEventListener('error', () => {
      if (source.readyState !== EventSource.CLOSED) status.textContent = 'reconnecting…';
    });
  }

  document.querySelectorAll('[data-refresh]').forEach(liveTable);
  document.querySelectorAll('form[data-autosubmit]').forEach(autosubmit);
  const log = document.getElementById('log');
  if (log && log.dataset.events) liveLog(log);
})();
