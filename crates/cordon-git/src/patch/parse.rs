//! A reader of patch headers: which files a patch touches, how, and with which modes.
//!
//! It does not apply anything. Its findings are compared with `git apply --numstat -z`
//! (git's own reading of the same bytes); a patch on whose paths the two disagree is refused.

use crate::changes::{ChangeStatus, RepoPath};

/// The header of one file's part of a patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FilePatch {
    /// The path before the change (`None` for a new file).
    pub old_path: Option<RepoPath>,
    /// The path after the change (`None` for a deleted file).
    pub new_path: Option<RepoPath>,
    /// How the file changes.
    pub status: ChangeStatus,
    /// The mode the file ends up with, when the patch says (`0o120000` is a symlink).
    pub new_mode: Option<u32>,
}

#[derive(Default)]
struct Header {
    git_old: Option<RepoPath>,
    git_new: Option<RepoPath>,
    minus: Option<Option<RepoPath>>,
    plus: Option<Option<RepoPath>>,
    rename_from: Option<RepoPath>,
    rename_to: Option<RepoPath>,
    copy_from: Option<RepoPath>,
    copy_to: Option<RepoPath>,
    old_mode: Option<u32>,
    new_mode: Option<u32>,
    new_file_mode: Option<u32>,
    deleted: bool,
    has_content: bool,
}

/// Reads every file header of `patch`, in order.
pub(crate) fn parse(patch: &[u8]) -> Result<Vec<FilePatch>, String> {
    let lines: Vec<&[u8]> = patch.split(|&b| b == b'\n').collect();
    let mut files = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if let Some(rest) = line.strip_prefix(b"diff --git ") {
            let mut header = Header::default();
            if let Some((a, b)) = split_git_line(rest)? {
                header.git_old = Some(a);
                header.git_new = Some(b);
            }
            i += 1;
            i = read_extended(&lines, i, &mut header)?;
            i = read_body(&lines, i, &mut header)?;
            files.push(finish(header)?);
        } else if line.starts_with(b"--- ")
            && lines.get(i + 1).is_some_and(|l| l.starts_with(b"+++ "))
        {
            let mut header = Header::default();
            i = read_extended(&lines, i, &mut header)?;
            i = read_body(&lines, i, &mut header)?;
            files.push(finish(header)?);
        } else if line.starts_with(b"@@ ") || line.starts_with(b"GIT binary patch") {
            return Err(format!("line {}: a hunk without a file header", i + 1));
        } else {
            // Text around the patches (a commit message, `index` lines of other tools): git
            // skips it too.
            i += 1;
        }
    }
    if files.is_empty() {
        return Err("the patch changes no file".to_owned());
    }
    Ok(files)
}

fn read_extended(lines: &[&[u8]], mut i: usize, h: &mut Header) -> Result<usize, String> {
    while let Some(&line) = lines.get(i) {
        let at = |what: &str| format!("line {}: {what}", i + 1);
        if let Some(rest) = line.strip_prefix(b"--- ") {
            h.minus = Some(side_path(rest).map_err(|e| at(&e))?);
        } else if let Some(rest) = line.strip_prefix(b"+++ ") {
            h.plus = Some(side_path(rest).map_err(|e| at(&e))?);
        } else if let Some(rest) = line.strip_prefix(b"rename from ") {
            h.rename_from = Some(header_name(rest).map_err(|e| at(&e))?);
        } else if let Some(rest) = line.strip_prefix(b"rename to ") {
            h.rename_to = Some(header_name(rest).map_err(|e| at(&e))?);
        } else if let Some(rest) = line.strip_prefix(b"copy from ") {
            h.copy_from = Some(header_name(rest).map_err(|e| at(&e))?);
        } else if let Some(rest) = line.strip_prefix(b"copy to ") {
            h.copy_to = Some(header_name(rest).map_err(|e| at(&e))?);
        } else if let Some(rest) = line.strip_prefix(b"old mode ") {
            h.old_mode = Some(mode(rest).map_err(|e| at(&e))?);
        } else if let Some(rest) = line.strip_prefix(b"new mode ") {
            h.new_mode = Some(mode(rest).map_err(|e| at(&e))?);
        } else if let Some(rest) = line.strip_prefix(b"new file mode ") {
            h.new_file_mode = Some(mode(rest).map_err(|e| at(&e))?);
        } else if let Some(rest) = line.strip_prefix(b"deleted file mode ") {
            mode(rest).map_err(|e| at(&e))?;
            h.deleted = true;
        } else if line.starts_with(b"index ")
            || line.starts_with(b"similarity index ")
            || line.starts_with(b"dissimilarity index ")
        {
        } else {
            break;
        }
        i += 1;
    }
    Ok(i)
}

/// Skips the hunks or binary data of one file, counting hunk lines so that a removed line
/// that looks like a header (`--- x`) is not taken for one.
fn read_body(lines: &[&[u8]], mut i: usize, h: &mut Header) -> Result<usize, String> {
    while let Some(&line) = lines.get(i) {
        if line.starts_with(b"@@ ") {
            let (mut old, mut new) =
                hunk_counts(line).ok_or_else(|| format!("line {}: bad hunk header", i + 1))?;
            h.has_content = true;
            i += 1;
            while old > 0 || new > 0 {
                let Some(&body) = lines.get(i) else {
                    return Err("the patch ends inside a hunk".to_owned());
                };
                match body.first() {
                    Some(b' ') | None => {
                        old = old
                            .checked_sub(1)
                            .ok_or("hunk longer than its header says")?;
                        new = new
                            .checked_sub(1)
                            .ok_or("hunk longer than its header says")?;
                    }
                    Some(b'-') => {
                        old = old
                            .checked_sub(1)
                            .ok_or("hunk longer than its header says")?
                    }
                    Some(b'+') => {
                        new = new
                            .checked_sub(1)
                            .ok_or("hunk longer than its header says")?
                    }
                    Some(b'\\') => {}
                    Some(_) => {
                        return Err(format!("line {}: unexpected line inside a hunk", i + 1));
                    }
                }
                i += 1;
            }
            while lines.get(i).is_some_and(|l| l.starts_with(b"\\")) {
                i += 1;
            }
        } else if line.starts_with(b"GIT binary patch") {
            h.has_content = true;
            i += 1;
            // Base85 lines never contain a space, so they cannot look like the next header.
            while lines.get(i).is_some_and(|l| !l.starts_with(b"diff --git ")) {
                i += 1;
            }
        } else if line.starts_with(b"Binary files ") {
            h.has_content = true;
            i += 1;
        } else {
            break;
        }
    }
    Ok(i)
}

fn hunk_counts(line: &[u8]) -> Option<(usize, usize)> {
    let text = std::str::from_utf8(line).ok()?;
    let mut parts = text.strip_prefix("@@ -")?.split(' ');
    let count = |range: &str| -> Option<usize> {
        match range.split_once(',') {
            Some((start, n)) => start.parse::<usize>().ok().and(n.parse().ok()),
            None => range.parse::<usize>().ok().map(|_| 1),
        }
    };
    let old = count(parts.next()?)?;
    let new = count(parts.next()?.strip_prefix('+')?)?;
    Some((old, new))
}

fn finish(h: Header) -> Result<FilePatch, String> {
    let minus = h.minus.clone().flatten();
    let plus = h.plus.clone().flatten();
    let old = h
        .rename_from
        .clone()
        .or(h.copy_from.clone())
        .or(minus)
        .or(h.git_old.clone());
    let new = h
        .rename_to
        .clone()
        .or(h.copy_to.clone())
        .or(plus)
        .or(h.git_new.clone());
    let created = h.new_file_mode.is_some() || matches!(h.minus, Some(None));
    let deleted = h.deleted || matches!(h.plus, Some(None));
    let (status, old_path, new_path) = if h.rename_from.is_some() || h.rename_to.is_some() {
        (ChangeStatus::Renamed, old, new)
    } else if h.copy_from.is_some() || h.copy_to.is_some() {
        (ChangeStatus::Copied, old, new)
    } else if created {
        (ChangeStatus::Added, None, new)
    } else if deleted {
        (ChangeStatus::Deleted, old, None)
    } else if h.old_mode.is_some() && h.new_mode.is_some() && !h.has_content {
        (ChangeStatus::ModeChanged, old, new)
    } else {
        (ChangeStatus::Modified, old, new)
    };
    let needs_old = !matches!(status, ChangeStatus::Added);
    let needs_new = !matches!(status, ChangeStatus::Deleted);
    if (needs_old && old_path.is_none()) || (needs_new && new_path.is_none()) {
        return Err("a file header whose path cannot be determined".to_owned());
    }
    Ok(FilePatch {
        old_path,
        new_path,
        status,
        new_mode: h.new_file_mode.or(h.new_mode),
    })
}

fn mode(text: &[u8]) -> Result<u32, String> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|t| u32::from_str_radix(t.trim_end(), 8).ok())
        .ok_or_else(|| "bad file mode".to_owned())
}

/// The path of a `---`/`+++` line: `None` for `/dev/null`, else the name without its first
/// component (`a/`, `b/`: git's default `-p1`).
fn side_path(text: &[u8]) -> Result<Option<RepoPath>, String> {
    let name = if text.starts_with(b"\"") {
        unquote(text)?
    } else {
        // A tab ends the name (a timestamp may follow); names with tabs are quoted.
        let end = text.iter().position(|&b| b == b'\t').unwrap_or(text.len());
        RepoPath::from_bytes(text[..end].to_vec())
    };
    if name.as_bytes() == b"/dev/null" {
        return Ok(None);
    }
    strip_first(name.as_bytes()).map(Some)
}

fn strip_first(name: &[u8]) -> Result<RepoPath, String> {
    match name.iter().position(|&b| b == b'/') {
        Some(at) if at + 1 < name.len() => Ok(RepoPath::from_bytes(name[at + 1..].to_vec())),
        _ => Err(format!(
            "name {:?} has no leading directory to strip",
            String::from_utf8_lossy(name)
        )),
    }
}

/// Splits `a/X b/Y` of a `diff --git` line; `None` when unquoted names make it ambiguous
/// (git then takes the names from other header lines, and so does this reader).
fn split_git_line(rest: &[u8]) -> Result<Option<(RepoPath, RepoPath)>, String> {
    if rest.starts_with(b"\"") {
        let (a, after) = unquote_prefix(rest)?;
        let after = after.strip_prefix(b" ").ok_or("bad diff --git line")?;
        let b = if after.starts_with(b"\"") {
            unquote(after)?
        } else {
            RepoPath::from_bytes(after.to_vec())
        };
        return Ok(Some((
            strip_first(a.as_bytes())?,
            strip_first(b.as_bytes())?,
        )));
    }
    if rest.ends_with(b"\"") {
        let start = rest
            .windows(2)
            .position(|w| w == b" \"")
            .ok_or("bad diff --git line")?;
        let a = RepoPath::from_bytes(rest[..start].to_vec());
        let b = unquote(&rest[start + 1..])?;
        return Ok(Some((
            strip_first(a.as_bytes())?,
            strip_first(b.as_bytes())?,
        )));
    }
    // Unquoted: both names are equal unless a rename/copy header follows.
    if rest.len() % 2 == 1 {
        let half = rest.len() / 2;
        let (a, b) = (&rest[..half], &rest[half + 1..]);
        if rest[half] == b' ' {
            let (a, b) = (strip_first(a)?, strip_first(b)?);
            if a == b {
                return Ok(Some((a, b)));
            }
        }
    }
    Ok(None)
}

/// The name of a `rename`/`copy` line. git quotes names with tabs or control characters, so
/// an unquoted one with a tab, or with trailing blanks git may trim, is refused: the two
/// readers of the patch could take different names from it.
fn header_name(text: &[u8]) -> Result<RepoPath, String> {
    let unquoted_oddity = !text.starts_with(b"\"")
        && (text.contains(&b'\t') || text.last().is_some_and(|b| b.is_ascii_whitespace()));
    if unquoted_oddity {
        return Err("an unquoted name with a tab or trailing blank".to_owned());
    }
    unquote(text)
}

/// Unquotes a whole C-style quoted name, or takes an unquoted one as is.
pub(crate) fn unquote(text: &[u8]) -> Result<RepoPath, String> {
    if !text.starts_with(b"\"") {
        return Ok(RepoPath::from_bytes(text.to_vec()));
    }
    let (path, rest) = unquote_prefix(text)?;
    if !rest.is_empty() && !rest.starts_with(b"\t") {
        return Err("text after a quoted name".to_owned());
    }
    Ok(path)
}

fn unquote_prefix(text: &[u8]) -> Result<(RepoPath, &[u8]), String> {
    let mut out = Vec::new();
    let mut i = 1;
    loop {
        let &b = text.get(i).ok_or("unterminated quoted name")?;
        i += 1;
        match b {
            b'"' => return Ok((RepoPath::from_bytes(out), &text[i..])),
            b'\\' => {
                let &e = text.get(i).ok_or("unterminated escape")?;
                i += 1;
                out.push(match e {
                    b'a' => 7,
                    b'b' => 8,
                    b'f' => 12,
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'v' => 11,
                    b'\\' | b'"' => e,
                    b'0'..=b'3' => {
                        let digits = text.get(i..i + 2).ok_or("short octal escape")?;
                        let mut v = u32::from(e - b'0');
                        for &d in digits {
                            if !(b'0'..=b'7').contains(&d) {
                                return Err("bad octal escape".to_owned());
                            }
                            v = v * 8 + u32::from(d - b'0');
                        }
                        i += 2;
                        u8::try_from(v).map_err(|_| "bad octal escape")?
                    }
                    _ => return Err("unknown escape".to_owned()),
                });
            }
            _ => out.push(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn p(s: &str) -> Option<RepoPath> {
        Some(RepoPath::from_bytes(s))
    }

    #[test]
    fn reads_adds_deletes_renames_modes_and_binary() {
        let patch = b"diff --git a/new.txt b/new.txt\nnew file mode 100644\nindex 0000000..e69de29\n--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+--- not a header\n\
diff --git a/gone b/gone\ndeleted file mode 100644\n--- a/gone\n+++ /dev/null\n@@ -1 +0,0 @@\n--- x\n\
diff --git a/old name b/new name\nsimilarity index 100%\nrename from old name\nrename to new name\n\
diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n\
diff --git a/img.bin b/img.bin\nnew file mode 100644\nindex 0000000..1111111\nGIT binary patch\nliteral 3\nKcmZQzWB>pF\n\nliteral 0\nHcmV?d00001\n\n\
diff --git a/link b/link\nnew file mode 120000\n--- /dev/null\n+++ b/link\n@@ -0,0 +1 @@\n+/tmp\n\\ No newline at end of file\n";
        let files = parse(patch).unwrap();
        let summary: Vec<_> = files
            .iter()
            .map(|f| (f.old_path.clone(), f.new_path.clone(), f.status, f.new_mode))
            .collect();
        assert_eq!(
            summary,
            vec![
                (None, p("new.txt"), ChangeStatus::Added, Some(0o100644)),
                (p("gone"), None, ChangeStatus::Deleted, None),
                (p("old name"), p("new name"), ChangeStatus::Renamed, None),
                (
                    p("run.sh"),
                    p("run.sh"),
                    ChangeStatus::ModeChanged,
                    Some(0o100755)
                ),
                (None, p("img.bin"), ChangeStatus::Added, Some(0o100644)),
                (None, p("link"), ChangeStatus::Added, Some(0o120000)),
            ]
        );
    }

    #[test]
    fn quoted_names_and_traditional_diffs() {
        let patch = b"--- \"a/x\\ty\"\n+++ \"b/x\\ty\"\n@@ -1 +1 @@\n-a\n+b\n--- a/\\303\\251\n+++ b/z\t2020-01-01\n@@ -1 +1 @@\n-a\n+b\n";
        let files = parse(patch).unwrap();
        assert_eq!(files[0].new_path, p("x\ty"));
        assert_eq!(files[1].old_path, p("\\303\\251"));
        assert_eq!(files[1].new_path, p("z"));
        assert_eq!(
            unquote(b"\"\\303\\251\"").unwrap(),
            RepoPath::from_bytes("é")
        );
    }

    #[test]
    fn malformed_patches_are_errors_not_panics() {
        for bad in [
            &b""[..],
            b"hello\n",
            b"@@ -1 +1 @@\n-a\n+b\n",
            b"diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n-a\n",
            b"diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n*a\n",
            b"diff --git \"a/x b/x\n",
            b"diff --git a/x b/x\nnew file mode 99999999999\n",
            b"--- \"a/\\q\"\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n",
        ] {
            assert!(parse(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn truncated_and_mutated_patches_never_panic() {
        let patch = b"diff --git \"a/x\\ty\" \"b/x\\ty\"\nold mode 100644\nnew mode 100755\n--- \"a/x\\ty\"\n+++ \"b/x\\ty\"\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n\\ No newline at end of file\ndiff --git a/o b/n\nrename from o\nrename to n\ndiff --git a/bin b/bin\nnew file mode 100644\nGIT binary patch\nliteral 1\nIcmZQz0000\n\n";
        assert!(parse(patch).is_ok());
        for end in 0..patch.len() {
            let _ = parse(&patch[..end]);
        }
        for at in 0..patch.len() {
            for byte in [b'\n', b'"', b'\\', b' ', b'@', b'-', b'+', b'0', 0xff] {
                let mut mutated = patch.to_vec();
                mutated[at] = byte;
                let _ = parse(&mutated);
            }
        }
    }
}
