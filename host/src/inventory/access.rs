//! Who may reach a template or a static resource.

use crate::auth::Principal;
use crate::runtime::Access;

/// Public: anyone. Protected: a verified caller holding every required scope.
pub fn may_access(
    access: Access,
    required_scopes: &[String],
    principal: Option<&Principal>,
) -> bool {
    match access {
        Access::Public => true,
        Access::Protected => principal.is_some_and(|p| p.has_all(required_scopes)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protected_needs_a_principal_with_every_scope() {
        let p = Principal::new(Some("alice".into()), "app".into(), vec!["a".into()], None);
        assert!(may_access(Access::Public, &[], None));
        assert!(!may_access(Access::Protected, &[], None));
        assert!(may_access(Access::Protected, &[], Some(&p)));
        assert!(may_access(Access::Protected, &["a".into()], Some(&p)));
        assert!(!may_access(
            Access::Protected,
            &["a".into(), "b".into()],
            Some(&p)
        ));
    }
}
