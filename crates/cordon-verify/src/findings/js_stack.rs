//! Stack frames of JavaScript errors: `at f (path:line:col)`, `at path:line:col`,
//! `❯ path:line:col` — the first one in the project's own code.

use super::number;

/// `path:line:col` at the end of a frame, unless it is node's own code or a dependency's.
pub(crate) fn frame(text: &str) -> Option<(String, u32, Option<u32>)> {
    let t = text.trim().trim_end_matches(')');
    let t = t.rsplit(['(', ' ']).next()?;
    let mut parts = t.rsplitn(3, ':');
    let col = parts.next()?;
    let line = parts.next()?;
    let file = parts.next()?;
    if file.is_empty() || file.starts_with("node:") || file.contains("node_modules/") {
        return None;
    }
    Some((file.to_owned(), number(line)?, number(col)))
}
