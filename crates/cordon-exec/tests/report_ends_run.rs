//! A supervisor that is PID 1 of a PID namespace of its own (the sandbox's) ends the run with
//! its complete report. Alone in its test binary: the tree's CPU time is reported only when
//! this process runs one program at a time.

mod common;

use cordon_exec::RunIo;

use common::{own_children, pid_1_supervisor};

#[test]
fn a_pid_1_supervisors_complete_report_ends_the_run_and_it_is_left_to_exit() {
    let (spec, _) = pid_1_supervisor("exec sleep 30.1", true);
    let result = cordon_exec::run(&spec, RunIo::default()).unwrap().result;
    // The run is reported from the report, while the supervisor still lives: it was not
    // waited for.
    assert_eq!(result.exit_code, Some(7), "{result:#?}");
    assert_eq!(result.stdout.head, "before-the-report\n", "{result:#?}");
    assert_eq!(result.leaked.processes_killed, 0, "{result:#?}");
    // The whole tree's CPU time comes from the report (the supervisor was not reaped).
    assert_eq!(result.resource.tree_cpu_user_ms, Some(12), "{result:#?}");
    assert_eq!(result.resource.tree_cpu_sys_ms, Some(34), "{result:#?}");
    // The supervisor (the shell, or the `sleep` it becomes) is still there.
    let left = own_children("30.1");
    assert_eq!(left.len(), 1, "{left:?}");
    // SAFETY: killing and reaping our own child.
    unsafe {
        libc::kill(left[0], libc::SIGKILL);
        libc::waitpid(left[0], std::ptr::null_mut(), 0);
    }
}
