//! The helper's entry point: run the sandbox, write the report, exit.

use cordon_types::{CHILD_REPORT_FD, ChildReport};

use crate::{outer, sys};

/// The helper's entry point. Call it first thing in `main` when `argv[1]` is
/// [`crate::INIT_ARG`], before any thread exists (it creates a user namespace, which a
/// multi-threaded process cannot). Writes one [`ChildReport`] to [`CHILD_REPORT_FD`] and
/// exits 0; a set-up failure becomes `setup_error` and the program does not run.
pub fn init_main() -> ! {
    let report = match outer::run() {
        Ok(report) => report,
        Err(e) => ChildReport {
            setup_error: Some(format!("sandbox set-up failed: {e}")),
            ..ChildReport::default()
        },
    };
    let mut text = serde_json::to_vec(&report).expect("a report serializes");
    text.push(b'\n');
    sys::write_all(CHILD_REPORT_FD, &text);
    sys::close(CHILD_REPORT_FD);
    sys::exit_now(0)
}
