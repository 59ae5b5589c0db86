//! Why an attempt failed, as the job's failure: a category that decides whether another
//! attempt may succeed, and a reason that carries the whole cause (every `source` of the
//! error, and its hint), so that the API and the dashboard say what really went wrong.
//!
//! Terminal (another attempt would fail the same way): a refused patch, a request or
//! configuration the caller must fix, an argument list longer than the kernel takes (all
//! `usage`, as a `repo.applyPatch` refusal always was), a plan or program the policy refuses
//! (`policy`). Retried: what the
//! host or cordon failed at (`infra`, `setup`).

use cordon_verify::VerifyError;

use super::Outcome;

/// `errno` E2BIG: the kernel refused the program's arguments and environment as too long.
const E2BIG: i32 = 7;

/// The error's text followed by each of its causes (`: `-separated), and its hint.
pub(crate) fn chain(error: &(dyn std::error::Error + 'static), hint: Option<&str>) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        // Some errors repeat their source's text in their own.
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    if let Some(hint) = hint {
        text.push_str(&format!(" (hint: {hint})"));
    }
    text
}

/// Whether the error, or one of its causes, is the kernel's "argument list too long".
pub(crate) fn is_argument_list_too_long(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(cause) = next {
        if let Some(io) = cause.downcast_ref::<std::io::Error>()
            && io.raw_os_error() == Some(E2BIG)
        {
            return true;
        }
        if cause.to_string().contains("Argument list too long") {
            return true;
        }
        next = cause.source();
    }
    false
}

/// The category of a program's failure as the runner recorded it, made terminal (`usage`)
/// when its reason says the kernel refused the arguments as too long: the runner counts a
/// program that could not start as `infra`, but no other attempt starts this one.
pub(crate) fn terminal_category(category: String, reason: &str) -> String {
    if category == "infra" && reason.contains("Argument list too long") {
        "usage".to_owned()
    } else {
        category
    }
}

/// A verification that could not produce a verdict (or a plan that could not be made).
pub(crate) fn verify_failed(error: &VerifyError) -> Outcome {
    let category = match error {
        VerifyError::PatchRefused(_) | VerifyError::Config(_) | VerifyError::Usage(_) => "usage",
        VerifyError::Infra { .. } if is_argument_list_too_long(error) => "usage",
        VerifyError::Infra { .. } => "infra",
        // A kind added later: cordon's failure, tried again, until said otherwise.
        _ => "infra",
    };
    Outcome::failed(category, chain(error, error.hint().as_deref()))
}

/// A program that could not be run (`cordon-runner`'s error).
pub(crate) fn run_failed(error: &cordon_runner::RunError) -> Outcome {
    let category = match error.class() {
        _ if is_argument_list_too_long(error) => "usage",
        cordon_runner::RunErrorClass::Infra => "infra",
        cordon_runner::RunErrorClass::Unenforceable => "setup",
        cordon_runner::RunErrorClass::Usage => "usage",
    };
    Outcome::failed(category, chain(error, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("spawn the program")]
    struct Spawn(#[source] std::io::Error);

    #[test]
    fn the_reason_names_every_cause_and_e2big_is_found_under_them() {
        let error = Spawn(std::io::Error::from_raw_os_error(E2BIG));
        let reason = chain(&error, Some("pass fewer arguments"));
        assert!(
            reason.starts_with("spawn the program: Argument list too long"),
            "{reason}"
        );
        assert!(reason.ends_with("(hint: pass fewer arguments)"), "{reason}");
        assert!(is_argument_list_too_long(&error));
        let other = Spawn(std::io::Error::from_raw_os_error(2));
        assert!(!is_argument_list_too_long(&other));
    }

    #[test]
    fn terminal_verify_errors_are_not_retried_and_infra_is() {
        let usage = verify_failed(&VerifyError::Usage("no such ref".into()));
        assert_eq!(usage.failure.as_ref().unwrap().category, "usage");
        assert!(!usage.failure.unwrap().retryable());
        let too_long = verify_failed(&VerifyError::Infra {
            context: "start stage `test`".into(),
            source: Box::new(std::io::Error::from_raw_os_error(E2BIG)),
        });
        let failure = too_long.failure.unwrap();
        assert_eq!(failure.category, "usage");
        assert!(!failure.retryable());
        assert!(
            failure.reason.contains("Argument list too long"),
            "{failure:?}"
        );
        let infra = verify_failed(&VerifyError::Infra {
            context: "make the scratch directory".into(),
            source: Box::new(std::io::Error::from_raw_os_error(28)),
        });
        assert!(infra.failure.unwrap().retryable());
    }
}
