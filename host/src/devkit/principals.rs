//! The callers `test-source` plays: by default two users, a token without a
//! user (client credentials) and a user token without the required scopes.

use crate::auth::Principal;

/// The client id every test token carries.
pub const TEST_CLIENT_ID: &str = "emseepea-test-source";

/// What a test principal is for; decided from the token and the template.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// A user holding every required scope: lists and reads its own records.
    User,
    /// No subject (a client-credentials token): must get a refusal, never records.
    NoSubject,
    /// Lacks a required scope: the host refuses it before the guest runs.
    MissingScopes,
}

/// One caller as given on the command line, before the template is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrincipalSpec {
    pub subject: Option<String>,
    /// `None`: exactly the template's required scopes.
    pub scopes: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrincipalSpecError {
    #[error(
        "--principal {0:?}: the subject is empty or has control characters or more than 256 characters (use `-` for a token without a user)"
    )]
    BadSubject(String),
}

impl std::str::FromStr for PrincipalSpec {
    type Err = PrincipalSpecError;

    /// `SUBJECT` (with the template's required scopes), `SUBJECT:SCOPES`
    /// (exactly these, comma- or space-separated; may be empty), and `-` as
    /// SUBJECT for a token without a user.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (subject, scopes) = match s.split_once(':') {
            Some((subject, scopes)) => (
                subject,
                Some(
                    scopes
                        .split([',', ' '])
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned)
                        .collect(),
                ),
            ),
            None => (s, None),
        };
        let subject = match subject {
            "-" => None,
            s if crate::auth::valid_subject(s) => Some(s.to_owned()),
            _ => return Err(PrincipalSpecError::BadSubject(s.to_owned())),
        };
        Ok(PrincipalSpec { subject, scopes })
    }
}

/// The defaults: users `alice` and `bob` (the example guests' data), a
/// token without a user, and `alice` without any scope.
pub fn defaults() -> Vec<PrincipalSpec> {
    vec![
        PrincipalSpec {
            subject: Some("alice".into()),
            scopes: None,
        },
        PrincipalSpec {
            subject: Some("bob".into()),
            scopes: None,
        },
        PrincipalSpec {
            subject: None,
            scopes: None,
        },
        PrincipalSpec {
            subject: Some("alice".into()),
            scopes: Some(vec![]),
        },
    ]
}

/// A principal ready to call with, labelled for the report.
#[derive(Debug, Clone)]
pub struct TestPrincipal {
    pub label: String,
    pub role: Role,
    pub principal: Principal,
}

impl PrincipalSpec {
    pub fn resolve(&self, required_scopes: &[String]) -> TestPrincipal {
        let scopes = self
            .scopes
            .clone()
            .unwrap_or_else(|| required_scopes.to_vec());
        let principal = Principal::new(
            self.subject.clone(),
            TEST_CLIENT_ID.into(),
            scopes,
            Some("http://127.0.0.1/mcp".into()),
        );
        let role = if !principal.has_all(required_scopes) {
            Role::MissingScopes
        } else if principal.subject.is_none() {
            Role::NoSubject
        } else {
            Role::User
        };
        let who = self.subject.as_deref().unwrap_or("(no subject)");
        let label = match (&self.scopes, role) {
            (None, _) => who.to_owned(),
            (Some(s), Role::MissingScopes) if s.is_empty() => format!("{who} without scopes"),
            (Some(s), _) => format!("{who} [{}]", s.join(" ")),
        };
        TestPrincipal {
            label,
            role,
            principal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse() {
        let p: PrincipalSpec = "alice".parse().unwrap();
        assert_eq!(p.subject.as_deref(), Some("alice"));
        assert_eq!(p.scopes, None);
        let p: PrincipalSpec = "-:a,b".parse().unwrap();
        assert_eq!(p.subject, None);
        assert_eq!(p.scopes, Some(vec!["a".into(), "b".into()]));
        let p: PrincipalSpec = "carol:".parse().unwrap();
        assert_eq!(p.scopes, Some(vec![]));
        assert!("".parse::<PrincipalSpec>().is_err());
        assert!("a\u{1}b".parse::<PrincipalSpec>().is_err());
    }

    #[test]
    fn roles_follow_the_template() {
        let req = vec!["docs:read".to_string()];
        let roles: Vec<Role> = defaults().iter().map(|s| s.resolve(&req).role).collect();
        assert_eq!(
            roles,
            [Role::User, Role::User, Role::NoSubject, Role::MissingScopes]
        );
        // A template without required scopes: the scope-less token is a user.
        assert_eq!(defaults()[3].resolve(&[]).role, Role::User);
    }
}
