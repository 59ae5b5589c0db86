//! Fields of a `/proc/PID/stat` line, read the one way that is safe with any command name.
//!
//! Field 2, the command name, is in parentheses and may hold anything a process chose
//! (`PR_SET_NAME`): spaces, `) `, bytes that are not UTF-8. The fields after it start after
//! the line's *last* `)`. Nothing here allocates, so it may run in a forked child.

/// Field `n` of a `/proc/PID/stat` line, numbered as in `proc(5)` (3 is the state, 4 the
/// parent's pid, 20 `num_threads`, 22 `starttime`, ...); `n` must be 3 or more.
pub fn field(stat: &[u8], n: usize) -> Option<&[u8]> {
    let end = stat.iter().rposition(|b| *b == b')')?;
    stat[end + 1..]
        .split(|b| b.is_ascii_whitespace())
        .filter(|f| !f.is_empty())
        .nth(n.checked_sub(3)?)
}

/// Field `n` (see [`field`]) parsed as a number.
pub fn number<T: std::str::FromStr>(stat: &[u8], n: usize) -> Option<T> {
    std::str::from_utf8(field(stat, n)?).ok()?.parse().ok()
}

/// Whether the state (field 3) says the process has ended: a zombie (`Z`) or dead (`X`).
pub fn has_ended(stat: &[u8]) -> bool {
    matches!(field(stat, 3), Some(b"Z" | b"X"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_come_after_the_last_parenthesis_whatever_the_name() {
        let stat =
            b"42 (a) b) (c\xff) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 3 0 987654 1000";
        assert_eq!(field(stat, 3), Some(&b"S"[..]));
        assert_eq!(number::<i32>(stat, 4), Some(1));
        assert_eq!(number::<u32>(stat, 20), Some(3));
        assert_eq!(number::<u64>(stat, 22), Some(987654));
        assert_eq!(field(stat, 99), None);
        assert_eq!(field(stat, 2), None);
        assert!(!has_ended(stat));
        assert!(has_ended(b"7 (x) Z 1"));
        assert!(has_ended(b"7 (x) X 1"));
        assert_eq!(field(b"garbage", 3), None);
    }
}
