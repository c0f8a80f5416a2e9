//! The isolation checklist as code: the contract every capability keeps,
//! checked in-process against a real component (`harness.rs`).
//!
//! Every subject (a registered capability; `sql` once per engine) answers
//! every [`Row`] with a [`Check`]: an obeyed/violated pair of probes, or a
//! declared, reasoned "does not apply". A pair holds when the probe that
//! stays within the rule is [`Outcome::Served`] and the probe that breaks
//! it is [`Outcome::Stopped`]: the same measurement shows the rule is
//! reachable and enforced. A subject implements its rows as one function
//! (`fn rows(row: Row) -> Check`, an exhaustive `match`, so a new row does
//! not compile until every subject answers it) and is listed once in
//! [`checklists!`] below, which makes its test. A registered capability (or
//! engine) missing from that list fails `every_capability_runs_the_checklist`.

use super::sql::config::Engine;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

/// One rule of the checklist.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Row {
    /// Host memory a call makes the host hold is bounded and charged to the
    /// call's `memory_bytes` before it is allocated.
    Memory,
    /// Handles per call are bounded (connections, requests in flight,
    /// resource-table entries); past the bound the capability answers with
    /// an error, the host keeps serving.
    Handles,
    /// Every string from a guest or a backend into a log line is guest text
    /// (escaped, cut, tagged with source and request id).
    LogText,
    /// A pool shared by callers gives each caller its share: one caller
    /// cannot make another wait past the pool wait.
    PoolShare,
    /// Nothing a source does reaches another source's sessions or state.
    SourceIsolation,
    /// Cancelling the call stops the backend work, not only the guest.
    Cancellation,
}

impl Row {
    pub const ALL: [Row; 6] = [
        Row::Memory,
        Row::Handles,
        Row::LogText,
        Row::PoolShare,
        Row::SourceIsolation,
        Row::Cancellation,
    ];
}

/// What a probe saw.
#[derive(Debug)]
pub enum Outcome {
    /// The guest got what it asked for (what it got, for the report).
    Served(String),
    /// The capability refused or stopped it (how, for the report).
    Stopped(String),
}

/// One scenario, run on its own current-thread runtime.
pub type Probe = Pin<Box<dyn Future<Output = Outcome>>>;

/// A subject's answer to one row.
pub enum Check {
    /// `obeyed` stays within the rule and must be served; `violated` breaks
    /// it and must be stopped.
    Pair { obeyed: Probe, violated: Probe },
    /// The row does not apply to this subject, and why.
    NotApplicable(&'static str),
}

/// An obeyed/violated pair.
pub fn pair(
    obeyed: impl Future<Output = Outcome> + 'static,
    violated: impl Future<Output = Outcome> + 'static,
) -> Check {
    Check::Pair {
        obeyed: Box::pin(obeyed),
        violated: Box::pin(violated),
    }
}

/// A subject's rows.
pub type Rows = fn(Row) -> Check;

/// Run every row of `subject`; panics naming each row that does not hold.
pub fn run(subject: &str, rows: Rows) {
    let mut failures = Vec::new();
    for row in Row::ALL {
        match rows(row) {
            Check::NotApplicable(reason) => {
                if reason.trim().len() < 20 {
                    failures.push(format!("{row:?}: \"does not apply\" needs a reason"));
                }
            }
            Check::Pair { obeyed, violated } => {
                // What each probe saw, for `--nocapture` (cut: some are long).
                let cut = |o: &Outcome| format!("{o:?}").chars().take(300).collect::<String>();
                let obeyed = block_on(obeyed);
                eprintln!("{subject} {row:?} obeyed: {}", cut(&obeyed));
                if let Outcome::Stopped(how) = obeyed {
                    failures.push(format!("{row:?}: the obeyed probe was stopped: {how}"));
                }
                let violated = block_on(violated);
                eprintln!("{subject} {row:?} violated: {}", cut(&violated));
                if let Outcome::Served(what) = violated {
                    failures.push(format!("{row:?}: the violated probe was served: {what}"));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "isolation checklist of {subject}:\n{}",
        failures.join("\n")
    );
}

fn block_on(probe: Probe) -> Outcome {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(probe)
}

/// The log lines written on this thread while `f` runs (the probe's own
/// runtime thread: host functions and hooks log there; an engine's
/// blocking-pool threads do not).
pub async fn logged<T>(f: impl Future<Output = T>) -> (T, Vec<String>) {
    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let sink = Sink::default();
    let writer = sink.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let out = {
        let _default = tracing::subscriber::set_default(subscriber);
        f.await
    };
    let text = String::from_utf8_lossy(&sink.0.lock().unwrap()).into_owned();
    (out, text.lines().map(String::from).collect())
}

/// A log row's verdict on `text`, which a guest or backend made the host
/// log during a probe: [`Outcome::Served`] when it reached the log as
/// written (the whole of it, a raw control character, or a line it forged),
/// [`Outcome::Stopped`] when it was escaped, cut or not logged. A line that
/// carries it must carry the request id (else the probe panics).
pub fn text_outcome(lines: &[String], text: &str, request_id: &str) -> Outcome {
    let all = lines.join("\n");
    if let Some(at) = all.find(text) {
        let start = all[..at].rfind('\n').map_or(0, |i| i + 1);
        let after = at + text.len();
        let end = all[after..].find('\n').map_or(all.len(), |i| after + i);
        let line = &all[start..end];
        assert!(
            line.contains(request_id),
            "a logged guest text without the request id {request_id:?}: {line}"
        );
        return Outcome::Served(format!("logged as written: {line}"));
    }
    if let Some(c) = text
        .chars()
        .find(|&c| c != '\n' && c.is_control() && all.contains(c))
    {
        return Outcome::Served(format!("{c:?} reached the log raw: {all}"));
    }
    for piece in text.split('\n').skip(1).filter(|p| !p.is_empty()) {
        if let Some(line) = lines.iter().find(|l| l.starts_with(piece)) {
            return Outcome::Served(format!("a forged line: {line}"));
        }
    }
    Outcome::Stopped(format!("escaped, cut or not logged: {lines:?}"))
}

/// `s` as a TOML string (for manifests made of hostile text).
pub fn toml_str(s: &str) -> String {
    toml::Value::String(s.into()).to_string()
}

/// What each subject is called: a registered capability's `NAME`, `sql`
/// once per engine (`sql/sqlite`).
fn subjects(registered: &[&'static str]) -> Vec<String> {
    let mut out = Vec::new();
    for name in registered {
        if *name == <super::sql::Sql as super::Capability>::NAME {
            out.extend(Engine::ALL.iter().map(|e| format!("{name}/{}", e.name())));
        } else {
            out.push(name.to_string());
        }
    }
    out.sort();
    out
}

/// The checklist's subjects, each with its rows and the test that runs them.
macro_rules! checklists {
    ($($test:ident: $subject:literal => $rows:path),* $(,)?) => {
        pub const CHECKLISTS: &[(&str, Rows)] = &[$(($subject, $rows)),*];
        $(#[test]
        fn $test() {
            run($subject, $rows);
        })*
    };
}

checklists! {
    isolation_checklist_sql_sqlite: "sql/sqlite" => super::sql::sqlite::checklist::rows,
    isolation_checklist_http: "http" => super::http::checklist::rows,
    isolation_checklist_wasi: "wasi" => super::wasi::checklist::rows,
    isolation_checklist_config: "config" => super::config::checklist::rows,
    isolation_checklist_sql_postgres: "sql/postgres" => super::sql::postgres::checklist::rows,
}

/// Subjects whose rows are being written elsewhere, and by whom; each must
/// leave this list for [`CHECKLISTS`].
pub const PENDING: &[(&str, &str)] = &[];

#[test]
fn every_capability_runs_the_checklist() {
    let registered = subjects(super::REGISTERED);
    let mut covered: Vec<String> = CHECKLISTS
        .iter()
        .map(|(s, _)| s.to_string())
        .chain(PENDING.iter().map(|(s, _)| s.to_string()))
        .collect();
    covered.sort();
    assert_eq!(
        registered, covered,
        "every registered capability (and SQL engine) runs the isolation checklist \
         (list it in checklists! in capabilities/checklist.rs)"
    );
}

#[test]
fn a_missing_subject_is_noticed() {
    // The check above is an equality: a capability added to the registry
    // without a checklist makes the two lists differ.
    let mut registered = super::REGISTERED.to_vec();
    registered.push("newcomer");
    assert!(subjects(&registered).contains(&"newcomer".to_string()));
    assert!(!CHECKLISTS.iter().any(|(s, _)| *s == "newcomer"));
}
