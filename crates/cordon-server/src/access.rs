//! Who sees what. A token belongs to one project and sees that project's jobs only (another
//! project's job is "not found", never "forbidden"). An **operator token** — one created for
//! the project `*` with the `admin` scope — sees every project's jobs, in the API and in the
//! dashboard alike, and may cancel them; it submits none (`*` names no project).

use cordon_store::TokenRow;

/// The project name of operator tokens: every project.
pub const ALL_PROJECTS: &str = "*";

/// Whether `token` is an operator token (project `*`, scope `admin`).
pub fn is_operator(token: &TokenRow) -> bool {
    token.project == ALL_PROJECTS && token.scopes.iter().any(|s| s == "admin")
}

/// Whether `token` may see the jobs of `project`.
pub fn sees(token: &TokenRow, project: &str) -> bool {
    token.project == project || is_operator(token)
}

/// The projects whose jobs a listing for `token` shows when the client asks for `wanted`:
/// `Some(vec![])` means every project (operators only); `None` means none (a project token
/// asking for another project).
pub fn listed_projects(token: &TokenRow, wanted: Option<&str>) -> Option<Vec<String>> {
    let wanted = wanted.filter(|p| !p.is_empty());
    if is_operator(token) {
        return Some(wanted.map(|p| vec![p.to_owned()]).unwrap_or_default());
    }
    match wanted {
        Some(p) if p != token.project => None,
        _ => Some(vec![token.project.clone()]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(project: &str, scopes: &[&str]) -> TokenRow {
        TokenRow {
            id: "t-x".into(),
            project: project.into(),
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
            created_at_ms: 0,
            expires_at_ms: None,
            revoked_at_ms: None,
            name: None,
            last_used_at_ms: None,
        }
    }

    #[test]
    fn a_project_token_sees_its_project_only() {
        let web = token("web", &["read", "admin"]);
        assert!(!is_operator(&web));
        assert!(sees(&web, "web") && !sees(&web, "api"));
        assert_eq!(listed_projects(&web, None), Some(vec!["web".into()]));
        assert_eq!(listed_projects(&web, Some("web")), Some(vec!["web".into()]));
        assert_eq!(listed_projects(&web, Some("api")), None);
    }

    #[test]
    fn only_an_admin_token_for_star_sees_every_project() {
        let operator = token("*", &["admin"]);
        assert!(is_operator(&operator) && sees(&operator, "web") && sees(&operator, "api"));
        assert_eq!(listed_projects(&operator, None), Some(vec![]));
        assert_eq!(listed_projects(&operator, Some("")), Some(vec![]));
        assert_eq!(
            listed_projects(&operator, Some("api")),
            Some(vec!["api".into()])
        );
        let reader = token("*", &["read"]);
        assert!(!is_operator(&reader) && !sees(&reader, "web"));
    }
}
