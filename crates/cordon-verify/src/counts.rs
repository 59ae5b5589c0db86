//! Test counts from the output of known test runners.

use cordon_types::TestCounts;

/// Sums the counts of every summary line of libtest (`test result: ok. 3 passed; 0 failed;
/// 1 ignored`), pytest (`== 3 passed, 1 failed, 2 skipped in 0.1s ==`) and node's test
/// runner (`# pass 3`, `# fail 0`, `# skipped 1`). `None` when no summary was recognised.
pub fn parse(output: &str) -> Option<TestCounts> {
    let mut counts = TestCounts::default();
    let mut seen = false;
    for line in output.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("test result: ") {
            seen = true;
            for part in rest.split(';') {
                let mut words = part.split_whitespace().rev();
                let (Some(kind), Some(n)) = (words.next(), words.next()) else {
                    continue;
                };
                let n: u64 = n
                    .trim_start_matches(|c: char| !c.is_ascii_digit())
                    .parse()
                    .unwrap_or(0);
                match kind {
                    "passed" => counts.passed += n,
                    "failed" => counts.failed += n,
                    "ignored" => counts.ignored += n,
                    _ => {}
                }
            }
        } else if let Some(summary) = pytest_summary(line) {
            seen = true;
            counts.passed += summary.passed;
            counts.failed += summary.failed;
            counts.ignored += summary.ignored;
            counts.subtests_passed += summary.subtests_passed;
            counts.subtests_failed += summary.subtests_failed;
        } else if let Some(rest) = line.strip_prefix("# ") {
            let mut words = rest.split_whitespace();
            if let (Some(kind), Some(n), None) = (words.next(), words.next(), words.next())
                && let Ok(n) = n.parse::<u64>()
            {
                match kind {
                    "pass" => {
                        counts.passed += n;
                        seen = true;
                    }
                    "fail" => {
                        counts.failed += n;
                        seen = true;
                    }
                    "skipped" | "todo" => counts.ignored += n,
                    _ => {}
                }
            }
        }
    }
    seen.then_some(counts)
}

/// pytest's closing line, with or without the `=` rulers of the default (non `-q`) mode:
/// `2 passed, 1 failed, 3 skipped, 1 warning in 0.12s`.
fn pytest_summary(line: &str) -> Option<TestCounts> {
    let inner = line.trim_matches('=').trim();
    let (parts, time) = inner.rsplit_once(" in ")?;
    let time = time.split_whitespace().next()?;
    time.strip_suffix('s')?.parse::<f64>().ok()?;
    let mut counts = TestCounts::default();
    let mut any = false;
    for part in parts.split(", ") {
        let (n, kind) = part.trim().split_once(' ')?;
        let n: u64 = n.parse().ok()?;
        match kind {
            "passed" | "xpassed" => counts.passed += n,
            "failed" | "error" | "errors" => counts.failed += n,
            "skipped" | "xfailed" | "deselected" => counts.ignored += n,
            // pytest 9's subtests are counted apart from the tests that hold them.
            "subtests passed" | "subtests xpassed" => counts.subtests_passed += n,
            "subtests failed" => counts.subtests_failed += n,
            "warning" | "warnings" | "rerun" | "subtests skipped" | "subtests xfailed" => {}
            _ => return None,
        }
        any = true;
    }
    any.then_some(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libtest_sums_every_binary() {
        let out = "running 2 tests\ntest result: ok. 2 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.00s\n\ntest result: FAILED. 3 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out\n";
        assert_eq!(
            parse(out),
            Some(TestCounts {
                passed: 5,
                failed: 1,
                ignored: 1,
                ..Default::default()
            })
        );
    }

    #[test]
    fn pytest_and_node() {
        assert_eq!(
            parse("===== 3 passed, 1 failed, 2 skipped in 0.12s =====").unwrap(),
            TestCounts {
                passed: 3,
                failed: 1,
                ignored: 2,
                ..Default::default()
            }
        );
        assert_eq!(
            parse("# tests 4\n# pass 3\n# fail 1\n# skipped 0\n").unwrap(),
            TestCounts {
                passed: 3,
                failed: 1,
                ignored: 0,
                ..Default::default()
            }
        );
        assert_eq!(
            parse("2 passed, 1 warning in 0.01s").unwrap(),
            TestCounts {
                passed: 2,
                failed: 0,
                ignored: 0,
                ..Default::default()
            }
        );
        assert_eq!(
            parse("4 failed, 2 passed, 4 subtests passed in 0.03s").unwrap(),
            TestCounts {
                passed: 2,
                failed: 4,
                ignored: 0,
                subtests_passed: 4,
                subtests_failed: 0,
            },
            "pytest 9 with subtests"
        );
        assert_eq!(parse("nothing here"), None);
        assert_eq!(parse("we met 3 people in 2024s"), None);
    }
}
