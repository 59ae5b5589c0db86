//! The executable's own start (`src/main.rs`, `build.rs`): on x86_64 Linux its entry point
//! populates the writable segments in one system call each, before the C library relocates
//! them.

mod support;

use support::cordon;

/// One mapping of `/proc/<pid>/smaps`: its range, permissions, path, size and resident size.
#[derive(Debug)]
struct Mapping {
    start: u64,
    end: u64,
    perms: String,
    path: String,
    size_kb: u64,
    rss_kb: u64,
}

fn parse_smaps(text: &str) -> Vec<Mapping> {
    let mut maps: Vec<Mapping> = Vec::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let first = words.next().unwrap_or("");
        if let Some((start, end)) = first.split_once('-')
            && let (Ok(start), Ok(end)) =
                (u64::from_str_radix(start, 16), u64::from_str_radix(end, 16))
        {
            let perms = words.next().unwrap_or("").to_owned();
            // offset, device and inode, then the path: the rest of the line, spaces and all.
            let path = line
                .split_whitespace()
                .nth(5)
                .and_then(|first| line.find(first).map(|at| line[at..].to_owned()))
                .unwrap_or_default();
            maps.push(Mapping {
                start,
                end,
                perms,
                path,
                size_kb: 0,
                rss_kb: 0,
            });
            continue;
        }
        let kb = || {
            words
                .clone()
                .next()
                .and_then(|w| w.parse::<u64>().ok())
                .unwrap_or(0)
        };
        let last = maps.last_mut();
        match (first, last) {
            ("Size:", Some(m)) => m.size_kb = kb(),
            ("Rss:", Some(m)) => m.rss_kb = kb(),
            _ => {}
        }
    }
    maps
}

/// Whether this kernel knows `MADV_POPULATE_WRITE` (Linux 5.14), asked on a page of its own.
fn kernel_populates() -> bool {
    // SAFETY: a fresh anonymous page, advised and unmapped; nothing else is touched.
    unsafe {
        let page = libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(page, libc::MAP_FAILED, "mmap");
        let known = libc::madvise(page, 4096, 23) == 0;
        libc::munmap(page, 4096);
        known
    }
}

// The executable is linked with the entry point where `build.rs` passes it: x86_64 Linux,
// glibc, static (this workspace's `.cargo/config.toml`).
#[cfg(all(
    target_arch = "x86_64",
    target_os = "linux",
    target_env = "gnu",
    target_feature = "crt-static"
))]
#[test]
fn the_writable_segments_are_populated_at_the_start() {
    if !kernel_populates() {
        support::missing_capability("this kernel has no MADV_POPULATE_WRITE (Linux 5.14)");
        return;
    }
    // The program prints the memory map of its parent, the running cordon.
    let out = cordon()
        .args([
            "run",
            "--no-sandbox",
            "--no-record",
            "--",
            "sh",
            "-c",
            "cat /proc/$PPID/smaps",
        ])
        .output()
        .expect("cordon runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let maps = parse_smaps(&String::from_utf8_lossy(&out.stdout));
    let exe = std::fs::canonicalize(env!("CARGO_BIN_EXE_cordon")).expect("the executable");
    let exe = exe.to_str().expect("a UTF-8 path");
    let image: Vec<&Mapping> = maps.iter().filter(|m| m.path == exe).collect();
    assert!(image.len() >= 3, "the executable's mappings: {maps:#?}");
    // The writable part of the image: its file-backed `rw-p` mappings, and the anonymous
    // mapping right after the last of them (the rest of `.bss`), if there is one.
    let last_end = image.iter().map(|m| m.end).max().expect("a mapping");
    let mut writable: Vec<&Mapping> = image
        .iter()
        .copied()
        .filter(|m| m.perms == "rw-p")
        .collect();
    writable.extend(
        maps.iter()
            .filter(|m| m.start == last_end && m.path.is_empty() && m.perms == "rw-p"),
    );
    assert!(
        !writable.is_empty(),
        "no writable mapping of the image: {maps:#?}"
    );
    // Without the entry point's `MADV_POPULATE_WRITE`, pages nothing wrote (most of `.bss`)
    // are not resident.
    for m in writable {
        assert_eq!(m.rss_kb, m.size_kb, "not fully populated: {m:?}");
    }
}
