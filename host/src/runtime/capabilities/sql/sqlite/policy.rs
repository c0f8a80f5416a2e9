//! What a guest's statement may do: the authorizer's decisions, as a pure
//! function of the grant and the action SQLite asks about (SQLite calls it
//! while preparing each statement, nested pragma statements included).
//!
//! Refused for every grant: ATTACH/DETACH, extension loading, transaction
//! control (one statement is one transaction, so nothing stays open on a
//! pooled connection), every TEMP object (a temp view or table would shadow
//! `main`'s names for the connection's next user), every PRAGMA outside
//! [`READ_ONLY_PRAGMAS`] (several are process-wide: `hard_heap_limit`,
//! `soft_heap_limit`, `temp_store_directory`, `threads`, ...), and any
//! action SQLite reports that this list does not know. On a read-only grant
//! also every write and every schema change.

use rusqlite::hooks::{AuthAction, AuthContext, Authorization};

/// What the source was granted on a database.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    ReadOnly,
    ReadWrite,
}

/// The pragmas a guest may use, all without side effects. `Argument` ones
/// take a table or index name (`PRAGMA table_info(t)`); `Query` ones are
/// read without a value (`PRAGMA user_version`; `= 3` would write it).
/// The settings the host sets are readable so a guest can see them.
const READ_ONLY_PRAGMAS: &[(&str, PragmaUse)] = &[
    ("table_info", PragmaUse::Argument),
    ("table_xinfo", PragmaUse::Argument),
    ("table_list", PragmaUse::Argument),
    ("index_list", PragmaUse::Argument),
    ("index_info", PragmaUse::Argument),
    ("index_xinfo", PragmaUse::Argument),
    ("foreign_key_list", PragmaUse::Argument),
    ("user_version", PragmaUse::Query),
    ("data_version", PragmaUse::Query),
    ("query_only", PragmaUse::Query),
    ("trusted_schema", PragmaUse::Query),
    ("temp_store", PragmaUse::Query),
    ("cache_size", PragmaUse::Query),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PragmaUse {
    Argument,
    Query,
}

/// The authorizer's answer for one action of a statement being prepared.
pub fn decide(access: Access, ctx: &AuthContext<'_>) -> Authorization {
    let allowed = match ctx.action {
        AuthAction::Select | AuthAction::Read { .. } | AuthAction::Recursive => true,
        AuthAction::Function { function_name } => {
            !function_name.eq_ignore_ascii_case("load_extension")
        }
        AuthAction::Pragma {
            pragma_name,
            pragma_value,
        } => pragma_allowed(pragma_name, pragma_value),
        // Writes and schema changes: a writable grant, on `main` only (a
        // `temp.` target is a TEMP object).
        AuthAction::Insert { .. }
        | AuthAction::Update { .. }
        | AuthAction::Delete { .. }
        | AuthAction::CreateIndex { .. }
        | AuthAction::CreateTable { .. }
        | AuthAction::CreateTrigger { .. }
        | AuthAction::CreateView { .. }
        | AuthAction::CreateVtable { .. }
        | AuthAction::DropIndex { .. }
        | AuthAction::DropTable { .. }
        | AuthAction::DropTrigger { .. }
        | AuthAction::DropView { .. }
        | AuthAction::DropVtable { .. }
        | AuthAction::Reindex { .. }
        | AuthAction::Analyze { .. } => {
            access == Access::ReadWrite && ctx.database_name == Some("main")
        }
        // SQLite names the schema in the action itself here.
        AuthAction::AlterTable { database_name, .. } => {
            access == Access::ReadWrite && database_name == "main"
        }
        // TEMP objects, transaction control, other files, and whatever else
        // SQLite may ask about.
        _ => false,
    };
    if allowed {
        Authorization::Allow
    } else {
        Authorization::Deny
    }
}

fn pragma_allowed(name: &str, value: Option<&str>) -> bool {
    READ_ONLY_PRAGMAS
        .iter()
        .find(|(known, _)| known.eq_ignore_ascii_case(name))
        .is_some_and(|(_, use_)| match use_ {
            PragmaUse::Argument => true,
            PragmaUse::Query => value.is_none(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::hooks::TransactionOperation;

    fn on(db: &'static str, action: AuthAction<'static>) -> AuthContext<'static> {
        AuthContext {
            action,
            database_name: Some(db),
            accessor: None,
        }
    }

    fn allowed(access: Access, ctx: AuthContext<'static>) -> bool {
        decide(access, &ctx) == Authorization::Allow
    }

    #[test]
    fn reads_are_allowed_on_every_grant() {
        for access in [Access::ReadOnly, Access::ReadWrite] {
            assert!(allowed(access, on("main", AuthAction::Select)));
            let read = AuthAction::Read {
                table_name: "documents",
                column_name: "owner",
            };
            assert!(allowed(access, on("main", read)));
            let f = AuthAction::Function {
                function_name: "length",
            };
            assert!(allowed(access, on("main", f)));
        }
    }

    #[test]
    fn writes_need_a_writable_grant_and_main() {
        let insert = AuthAction::Insert { table_name: "t" };
        assert!(!allowed(Access::ReadOnly, on("main", insert)));
        assert!(allowed(Access::ReadWrite, on("main", insert)));
        assert!(!allowed(Access::ReadWrite, on("temp", insert)));
        let create = AuthAction::CreateTable { table_name: "t2" };
        assert!(!allowed(Access::ReadOnly, on("main", create)));
        assert!(allowed(Access::ReadWrite, on("main", create)));
    }

    #[test]
    fn temp_objects_transactions_and_attach_are_refused_on_every_grant() {
        let refused = [
            AuthAction::CreateTempView {
                view_name: "documents",
            },
            AuthAction::CreateTempTable { table_name: "t" },
            AuthAction::CreateTempTrigger {
                trigger_name: "x",
                table_name: "t",
            },
            AuthAction::CreateTempIndex {
                index_name: "i",
                table_name: "t",
            },
            AuthAction::Transaction {
                operation: TransactionOperation::Begin,
            },
            // COMMIT / END arrive as `Unknown`.
            AuthAction::Transaction {
                operation: TransactionOperation::Unknown,
            },
            AuthAction::Transaction {
                operation: TransactionOperation::Rollback,
            },
            AuthAction::Savepoint {
                operation: TransactionOperation::Begin,
                savepoint_name: "s",
            },
            AuthAction::Attach { filename: "/tmp/x" },
            AuthAction::Detach { database_name: "x" },
            AuthAction::Function {
                function_name: "LOAD_EXTENSION",
            },
            AuthAction::Unknown {
                code: 0,
                arg1: None,
                arg2: None,
            },
        ];
        for action in refused {
            for access in [Access::ReadOnly, Access::ReadWrite] {
                assert!(!allowed(access, on("main", action)), "{action:?}");
            }
        }
    }

    #[test]
    fn only_listed_pragmas_and_only_as_reads() {
        let pragma = |name, value| AuthAction::Pragma {
            pragma_name: name,
            pragma_value: value,
        };
        for access in [Access::ReadOnly, Access::ReadWrite] {
            assert!(allowed(access, on("main", pragma("table_info", Some("t")))));
            assert!(allowed(access, on("main", pragma("USER_VERSION", None))));
            assert!(!allowed(
                access,
                on("main", pragma("user_version", Some("3")))
            ));
            assert!(!allowed(
                access,
                on("main", pragma("query_only", Some("0")))
            ));
            for global in [
                "hard_heap_limit",
                "soft_heap_limit",
                "temp_store_directory",
                "data_store_directory",
                "threads",
                "writable_schema",
                "journal_mode",
                "mmap_size",
            ] {
                assert!(
                    !allowed(access, on("main", pragma(global, None))),
                    "{global}"
                );
                assert!(
                    !allowed(access, on("main", pragma(global, Some("1")))),
                    "{global}"
                );
            }
        }
    }
}
