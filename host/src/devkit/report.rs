//! What `test-source` found: contract breaks (each a rule, the principal,
//! the call and the offending value), warnings, and per-call budget use.
//! Rendered as a table for people or as JSON for machines.

use serde::Serialize;
use std::fmt::Write;

/// Offending values are cut to this many characters in the report: a
/// hostile value may be megabytes long.
pub const MAX_VALUE_CHARS: usize = 160;

/// Every rule `test-source` checks. The first group is the seed's per-page
/// rules as the server enforces them (`inventory::validate`); the rest are
/// what the server cannot see within one page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    TooManyEntries,
    HasMoreWithoutEntries,
    KeyLength,
    KeyCharacters,
    KeyOrder,
    KeyNotAfter,
    UriLength,
    UriTemplate,
    UriDuplicate,
    NameLength,
    MimeTypeLength,
    /// A per-page rule this version of the kit does not name yet.
    PageRule,
    /// A URI listed twice in one traversal (on different pages).
    UriUniqueAcrossTraversal,
    /// `has-more` true followed by nothing, or false with more to come.
    HasMoreTruthful,
    /// Traversals with different `limit`s list different entries.
    LimitIndependent,
    /// Two identical traversals list different entries.
    Deterministic,
    /// `list` failed for a user holding every required scope.
    ListFails,
    /// A listed URI cannot be read by the principal it was listed for.
    ReadListed,
    /// A read result the server rejects (empty, oversized, bad fields).
    ReadResult,
    /// One user's record is listed for, or readable by, another user.
    Ownership,
    /// A principal without a subject got records instead of a refusal.
    RequireSubject,
    /// A never-listed URI that matches the template was not `not-found`.
    ReadUnlistedNotFound,
    /// A call ran out of fuel, memory or time.
    Budget,
}

impl Rule {
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::TooManyEntries => "too-many-entries",
            Rule::HasMoreWithoutEntries => "has-more-without-entries",
            Rule::KeyLength => "key-length",
            Rule::KeyCharacters => "key-characters",
            Rule::KeyOrder => "key-order",
            Rule::KeyNotAfter => "key-not-after",
            Rule::UriLength => "uri-length",
            Rule::UriTemplate => "uri-template",
            Rule::UriDuplicate => "uri-duplicate",
            Rule::NameLength => "name-length",
            Rule::MimeTypeLength => "mime-type-length",
            Rule::PageRule => "page-rule",
            Rule::UriUniqueAcrossTraversal => "uri-unique-across-traversal",
            Rule::HasMoreTruthful => "has-more-truthful",
            Rule::LimitIndependent => "limit-independent",
            Rule::Deterministic => "deterministic",
            Rule::ListFails => "list-fails",
            Rule::ReadListed => "read-listed",
            Rule::ReadResult => "read-result",
            Rule::Ownership => "ownership",
            Rule::RequireSubject => "require-subject",
            Rule::ReadUnlistedNotFound => "read-unlisted-not-found",
            Rule::Budget => "budget",
        }
    }
}

/// One contract break.
#[derive(Debug, Clone, Serialize)]
pub struct Break {
    pub rule: Rule,
    pub principal: String,
    /// The first call that showed it, e.g. `list(after="k9", limit=7)`.
    pub call: String,
    pub value: String,
    /// How many calls showed the same rule for the same principal.
    pub occurrences: usize,
}

/// min/median/max of one measure over one kind of call, and its budget.
#[derive(Debug, Clone, Serialize)]
pub struct Stat {
    pub min: u64,
    pub median: u64,
    pub max: u64,
    pub budget: u64,
}

impl Stat {
    /// `None` for no samples.
    pub fn of(samples: &mut [u64], budget: u64) -> Option<Stat> {
        samples.sort_unstable();
        Some(Stat {
            min: *samples.first()?,
            median: samples[samples.len() / 2],
            max: *samples.last()?,
            budget,
        })
    }

    pub fn over_half(&self) -> bool {
        self.median > self.budget / 2
    }
}

/// Budget use of one kind of call (`list` or `read`).
#[derive(Debug, Clone, Serialize)]
pub struct BudgetRow {
    pub call: &'static str,
    pub calls: usize,
    pub fuel: Stat,
    pub memory_bytes: Stat,
    pub time_us: Stat,
}

/// A principal and what became of it.
#[derive(Debug, Clone, Serialize)]
pub struct PrincipalRow {
    pub label: String,
    pub role: super::principals::Role,
    pub outcome: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub source: String,
    pub file: String,
    pub records: &'static str,
    pub lists: bool,
    pub principals: Vec<PrincipalRow>,
    pub breaks: Vec<Break>,
    pub warnings: Vec<String>,
    pub budgets: Vec<BudgetRow>,
    pub calls: usize,
}

/// `s` cut to [`MAX_VALUE_CHARS`] characters, control characters escaped.
pub fn shorten(s: &str) -> String {
    let total = s.chars().count();
    let mut out: String = s
        .chars()
        .take(MAX_VALUE_CHARS)
        .flat_map(|c| {
            // Control characters escaped (a value may hold a newline); the rest as is.
            let escaped: Vec<char> = if c.is_control() {
                c.escape_debug().collect()
            } else {
                vec![c]
            };
            escaped
        })
        .collect();
    if total > MAX_VALUE_CHARS {
        let _ = write!(out, "… ({total} characters)");
    }
    out
}

impl Report {
    pub fn ok(&self) -> bool {
        self.breaks.is_empty()
    }

    /// Record a break, merging repeats of the same rule for the same principal.
    pub fn add(&mut self, rule: Rule, principal: &str, call: String, value: &str) {
        if let Some(b) = self
            .breaks
            .iter_mut()
            .find(|b| b.rule == rule && b.principal == principal)
        {
            b.occurrences += 1;
            return;
        }
        self.breaks.push(Break {
            rule,
            principal: principal.to_owned(),
            call,
            value: shorten(value),
            occurrences: 1,
        });
    }

    pub fn warn(&mut self, warning: String) {
        if !self.warnings.contains(&warning) {
            self.warnings.push(warning);
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report serializes")
    }

    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "source {} ({}): {} records, {}; {} guest calls",
            self.source,
            self.file,
            self.records,
            if self.lists { "lists" } else { "read only" },
            self.calls
        );
        let _ = writeln!(out, "\nprincipals:");
        for p in &self.principals {
            let _ = writeln!(out, "  {:<28} {}", p.label, p.outcome);
        }
        if !self.budgets.is_empty() {
            let _ = writeln!(
                out,
                "\n{:<5} {:>6}  {:<34} {:<34} time µs (min/median/max of budget)",
                "call", "calls", "fuel (min/median/max of budget)", "memory bytes"
            );
            for b in &self.budgets {
                let cell = |s: &Stat| format!("{}/{}/{} of {}", s.min, s.median, s.max, s.budget);
                let _ = writeln!(
                    out,
                    "{:<5} {:>6}  {:<34} {:<34} {}",
                    b.call,
                    b.calls,
                    cell(&b.fuel),
                    cell(&b.memory_bytes),
                    cell(&b.time_us)
                );
            }
        }
        for w in &self.warnings {
            let _ = writeln!(out, "warning: {w}");
        }
        if self.breaks.is_empty() {
            let _ = writeln!(out, "\nno contract breaks: ok");
            return out;
        }
        let _ = writeln!(
            out,
            "\n{:<28} {:<20} {:<40} offending value",
            "rule", "principal", "call"
        );
        for b in &self.breaks {
            let times = if b.occurrences > 1 {
                format!(" (×{})", b.occurrences)
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "{:<28} {:<20} {:<40} {}{times}",
                b.rule.as_str(),
                b.principal,
                b.call,
                b.value
            );
        }
        let _ = writeln!(out, "\n{} contract break(s)", self.breaks.len());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_and_shortening() {
        let s = Stat::of(&mut [5, 1, 9], 10).unwrap();
        assert_eq!((s.min, s.median, s.max), (1, 5, 9));
        assert!(!s.over_half());
        assert!(Stat::of(&mut [6], 10).unwrap().over_half());
        assert!(Stat::of(&mut [], 10).is_none());
        assert_eq!(shorten("a\nb"), "a\\nb");
        assert_eq!(shorten("alice's"), "alice's");
        let long = shorten(&"x".repeat(1000));
        assert!(long.starts_with(&"x".repeat(MAX_VALUE_CHARS)));
        assert!(long.ends_with("(1000 characters)"));
    }

    #[test]
    fn repeats_merge() {
        let mut r = Report {
            source: "s".into(),
            file: "f".into(),
            records: "per-user",
            lists: true,
            principals: vec![],
            breaks: vec![],
            warnings: vec![],
            budgets: vec![],
            calls: 0,
        };
        r.add(Rule::KeyOrder, "alice", "list".into(), "k");
        r.add(Rule::KeyOrder, "alice", "list 2".into(), "k");
        r.add(Rule::KeyOrder, "bob", "list".into(), "k");
        assert_eq!(r.breaks.len(), 2);
        assert_eq!(r.breaks[0].occurrences, 2);
        assert!(r.to_table().contains("key-order"));
        assert!(!r.ok());
    }
}
