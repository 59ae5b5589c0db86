//! The page shell (head, navigation, who is logged in) and the small pieces every page uses:
//! state badges, times, durations, cleaned program text.

use cordon_store::JobState;
use maud::{DOCTYPE, Markup, html};

use super::assets;
use super::auth::Viewer;

/// Which page the navigation marks as current.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Nav {
    /// The jobs table (and a job's page).
    Jobs,
    /// The projects.
    Projects,
    /// The sessions.
    Sessions,
    /// The workers.
    Workers,
    /// None (login, errors).
    None,
}

/// A whole page.
pub(crate) fn page(title: &str, viewer: Option<&Viewer>, nav: Nav, body: Markup) -> Markup {
    let link = |target: Nav, href: &str, text: &str| {
        html! {
            @if nav == target {
                a href=(href) aria-current="page" { (text) }
            } @else {
                a href=(href) { (text) }
            }
        }
    };
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="color-scheme" content="light";
                title { (title) " · cordon" }
                link rel="icon" href=(assets::url("icon.svg")) type="image/svg+xml";
                link rel="stylesheet" href=(assets::url("dashboard.css"));
                script src=(assets::url("dashboard.js")) defer {}
            }
            body {
                a.skip href="#main" { "Skip to the content" }
                header.top {
                    a.brand href="/" { "cordon" }
                    @if let Some(viewer) = viewer {
                        nav aria-label="Main" {
                            (link(Nav::Jobs, "/", "Jobs"))
                            (link(Nav::Projects, "/projects", "Projects"))
                            (link(Nav::Sessions, "/sessions", "Sessions"))
                            (link(Nav::Workers, "/workers", "Workers"))
                        }
                        div.who {
                            span {
                                @if viewer.is_operator() {
                                    "Operator · every project"
                                } @else {
                                    "Project " strong { (viewer.token.project) }
                                }
                                " · " (viewer.token.id)
                            }
                            form method="post" action="/logout" {
                                input type="hidden" name="csrf" value=(viewer.csrf);
                                button.link type="submit" { "Log out" }
                            }
                        }
                    }
                }
                main #main tabindex="-1" { (body) }
            }
        }
    }
}

/// The icon and class of a job state (the state's name is always written out too).
fn state_icon(state: JobState) -> &'static str {
    match state {
        JobState::Queued => "◷",
        JobState::Running => "▶",
        JobState::Succeeded => "✓",
        JobState::Failed => "✗",
        JobState::Cancelled => "⊘",
        JobState::Interrupted => "⚠",
    }
}

/// A job's state: icon, colour and name.
pub(crate) fn state_badge(state: JobState) -> Markup {
    html! {
        span class={ "state state-" (state.as_str()) } {
            span.icon aria-hidden="true" { (state_icon(state)) }
            " " (state.as_str())
        }
    }
}

/// A stage's (or a timeline bar's) status as a badge: `pass`, `fail`, `timeout`, `error`,
/// `skipped`, `running`, `cancelled`.
pub(crate) fn status_badge(status: &str) -> Markup {
    let icon = match status {
        "pass" => "✓",
        "fail" => "✗",
        "timeout" => "⌛",
        "error" => "⚠",
        "skipped" => "–",
        "running" => "▶",
        _ => "⊘",
    };
    html! {
        span class={ "status status-" (css_name(status)) } {
            span.icon aria-hidden="true" { (icon) } " " (status)
        }
    }
}

/// `text` reduced to `[a-z0-9-]`, for a class name built from data.
pub(crate) fn css_name(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect()
}

/// A point in time (Unix epoch ms) as `YYYY-MM-DD HH:MM:SS` UTC, machine-readable too.
pub(crate) fn when(ms: i64) -> Markup {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
    let text = humantime::format_rfc3339_seconds(at).to_string();
    let shown = text.trim_end_matches('Z').replacen('T', " ", 1);
    html! { time datetime=(text) { (shown) } }
}

/// A point in time in a table: the time of day when it is today (UTC), else the date and
/// minute; the whole timestamp on hover and for machines.
pub(crate) fn when_short(ms: i64, now_ms: i64) -> Markup {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
    let text = humantime::format_rfc3339_seconds(at).to_string();
    let same_day = ms.div_euclid(86_400_000) == now_ms.div_euclid(86_400_000);
    let shown = if same_day {
        text.get(11..19).unwrap_or(&text).to_owned()
    } else {
        text.get(..16).unwrap_or(&text).replacen('T', " ", 1)
    };
    html! { time datetime=(text) title=(text) { (shown) } }
}

/// A duration for people: `850 ms`, `12.3 s`, `4 min 05 s`, `2 h 03 min`.
pub(crate) fn duration(ms: u64) -> String {
    match ms {
        0..1_000 => format!("{ms} ms"),
        1_000..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        60_000..3_600_000 => format!("{} min {:02} s", ms / 60_000, (ms / 1000) % 60),
        _ => format!("{} h {:02} min", ms / 3_600_000, (ms / 60_000) % 60),
    }
}

/// Program or repository text made safe to look at: escape sequences and control
/// characters dropped (HTML escaping is the template's).
pub(crate) fn clean(text: &str) -> String {
    cordon_types::text::for_terminal(text)
}

/// At most `max` characters of `text` on one line, with `…` when cut.
pub(crate) fn short(text: &str, max: usize) -> String {
    let line = cordon_types::text::for_terminal_line(text);
    match line.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(duration(850), "850 ms");
        assert_eq!(duration(12_345), "12.3 s");
        assert_eq!(duration(245_000), "4 min 05 s");
        assert_eq!(duration(7_380_000), "2 h 03 min");
    }

    #[test]
    fn hostile_text_is_escaped_and_cleaned() {
        let probe = "<script>alert(1)</script>\u{1b}[2J";
        let markup = html! { p { (clean(probe)) } }.into_string();
        assert_eq!(markup, "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>");
        assert_eq!(short("abcdef", 3), "abc…");
        assert_eq!(css_name("a b<c"), "a-b-c");
        let badge = state_badge(JobState::Failed).into_string();
        assert!(
            badge.contains("state-failed") && badge.contains("failed"),
            "{badge}"
        );
    }
}
