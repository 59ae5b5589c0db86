//! Spawning many programs from one process, from several threads at once, with output of
//! every size around the read buffer's: nothing may be lost or mixed.

use cordon_exec::{RunIo, RunSpec};

/// Runs `sh -c SCRIPT` and returns its stdout (all of it: the limit is above its size).
fn stdout_of(script: &str) -> String {
    let mut spec = RunSpec::new("sh", ["-c", script]);
    spec.output_limit = 4 << 20;
    let outcome = cordon_exec::run(&spec, RunIo::default()).expect("cordon-exec runs it");
    assert_eq!(outcome.exit_code, 0, "{script}: {:?}", outcome.result);
    assert!(!outcome.result.stdout.truncated, "{script}");
    outcome.result.stdout.head
}

#[test]
fn spawns_from_many_threads_at_once_each_run_their_own_program() {
    let threads: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                for i in 0..25 {
                    let want = format!("thread {t} run {i}");
                    assert_eq!(stdout_of(&format!("echo '{want}'")), format!("{want}\n"));
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("a thread's runs all passed");
    }
}

#[test]
fn output_around_the_read_buffers_size_arrives_whole_and_in_order() {
    // 64 KiB is the read buffer.
    for size in [
        1,
        64 * 1024 - 1,
        64 * 1024,
        64 * 1024 + 1,
        300 * 1024,
        1024 * 1024 + 7,
    ] {
        // Lines numbered in order, cut to `size` bytes.
        let script = format!("seq 1 400000 | head -c {size}");
        let out = stdout_of(&script);
        assert_eq!(out.len(), size, "size {size}");
        let expected: String = (1..=400_000)
            .map(|n| format!("{n}\n"))
            .collect::<String>()
            .chars()
            .take(size)
            .collect();
        assert!(out == expected, "size {size}: output differs from seq's");
    }
}
