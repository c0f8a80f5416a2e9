//! RFC 6570 URI templates: parsing (levels 1–4 syntax), matching a concrete
//! URI against a template, and deciding whether two templates can match one
//! URI. The host matches to route `resources/read` to the one source whose
//! template matches, and to check that every URI a guest lists is
//! "consistent with its registered template"; at startup it refuses two
//! templates that can match one URI (`overlap`), so a URI has one owner.
//! (Over 500 lines: the parser, matcher and expander share the parsed
//! template's private types; a third is property tests.)
//!
//! Matching asks "could some expansion of this template produce this URI?".
//! Each expression may produce the characters its operator can emit (simple
//! expansion only unreserved characters, percent-escapes and `,`; `+`/`#`
//! any URI character; `/ . ; ? &` their prefix then their separators).
//! Simple and `+` expressions must produce at least one character: an empty
//! path segment never identifies a resource.
//!
//! A template compiles to a small NFA whose states sit in a line: a literal
//! byte or an expression's first character moves to the next state, an
//! expression's further characters stay, and an expression may be left (or,
//! if it can be empty, skipped) without input. Matching runs all states at
//! once as a bitset (shift-and): per URI byte, two operations per 64 states
//! and one per expression exit. With templates bounded at startup
//! (`MAX_TEMPLATE_LEN`, `MAX_TEMPLATE_EXPRESSIONS`) that is a small constant,
//! so matching is linear in the URI whatever the template: no backtracking,
//! no per-active-state work.
//!
//! (Over 500 lines: parsing, matching and overlap share one automaton;
//! about 430 lines are tests, the overlap checked against brute force.)

use crate::limits::{MAX_TEMPLATE_EXPRESSIONS, MAX_TEMPLATE_LEN};
use std::collections::{HashMap, VecDeque};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UriTemplate {
    source: String,
    parts: Vec<Part>,
    nfa: Nfa,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Literal(Vec<u8>),
    Expression { op: Op, vars: Vec<String> },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Simple,
    Reserved,
    Fragment,
    Label,
    Path,
    PathParam,
    Query,
    QueryContinuation,
}

/// Why a template was refused. Offsets are byte offsets into the template.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("is {len} bytes long; at most {max} are allowed")]
    TooLong { len: usize, max: usize },
    #[error("has more than {max} expressions")]
    TooManyExpressions { max: usize },
    #[error("unclosed expression at offset {0}")]
    Unclosed(usize),
    #[error("unexpected '}}' at offset {0}")]
    UnexpectedClose(usize),
    #[error("character {ch:?} not allowed in a template literal (offset {offset})")]
    LiteralCharacter { ch: char, offset: usize },
    #[error("reserved operator in expression at offset {0}")]
    ReservedOperator(usize),
    #[error("bad prefix modifier in expression at offset {0}")]
    PrefixModifier(usize),
    #[error("bad variable name {name:?} in expression at offset {offset}")]
    VariableName { name: String, offset: usize },
}

impl TemplateError {
    /// A bound of the host's (not a syntax error of RFC 6570).
    pub fn is_bound(&self) -> bool {
        matches!(
            self,
            TemplateError::TooLong { .. } | TemplateError::TooManyExpressions { .. }
        )
    }
}

const fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

const fn is_reserved(b: u8) -> bool {
    matches!(
        b,
        b':' | b'/'
            | b'?'
            | b'#'
            | b'['
            | b']'
            | b'@'
            | b'!'
            | b'$'
            | b'&'
            | b'\''
            | b'('
            | b')'
            | b'*'
            | b'+'
            | b','
            | b';'
            | b'='
    )
}

fn is_varchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'%' || b == b'.'
}

impl Op {
    /// The first character a non-empty expansion starts with, if any.
    fn prefix(self) -> Option<u8> {
        match self {
            Op::Simple | Op::Reserved => None,
            Op::Fragment => Some(b'#'),
            Op::Label => Some(b'.'),
            Op::Path => Some(b'/'),
            Op::PathParam => Some(b';'),
            Op::Query => Some(b'?'),
            Op::QueryContinuation => Some(b'&'),
        }
    }

    /// Characters an expansion may contain after its prefix.
    fn allows(self, b: u8) -> bool {
        let base = is_unreserved(b) || b == b'%' || b == b',';
        match self {
            Op::Simple | Op::Label => base,
            Op::Reserved | Op::Fragment => base || is_reserved(b),
            Op::Path => base || b == b'/',
            Op::PathParam => base || b == b';' || b == b'=',
            Op::Query | Op::QueryContinuation => base || b == b'&' || b == b'=',
        }
    }

    fn needs_content(self) -> bool {
        matches!(self, Op::Simple | Op::Reserved)
    }
}

impl UriTemplate {
    /// Parse `source`, refusing anything over the host's bounds before
    /// looking at it further.
    pub fn parse(source: &str) -> Result<Self, TemplateError> {
        if source.len() > MAX_TEMPLATE_LEN {
            return Err(TemplateError::TooLong {
                len: source.len(),
                max: MAX_TEMPLATE_LEN,
            });
        }
        let bytes = source.as_bytes();
        let mut parts = Vec::new();
        let mut literal = Vec::new();
        let mut expressions = 0;
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            match b {
                b'{' => {
                    let end = source[i..]
                        .find('}')
                        .map(|e| i + e)
                        .ok_or(TemplateError::Unclosed(i))?;
                    expressions += 1;
                    if expressions > MAX_TEMPLATE_EXPRESSIONS {
                        return Err(TemplateError::TooManyExpressions {
                            max: MAX_TEMPLATE_EXPRESSIONS,
                        });
                    }
                    if !literal.is_empty() {
                        parts.push(Part::Literal(std::mem::take(&mut literal)));
                    }
                    parts.push(parse_expression(&source[i + 1..end], i)?);
                    i = end + 1;
                }
                b'}' => return Err(TemplateError::UnexpectedClose(i)),
                b if b.is_ascii_control()
                    || b == b' '
                    || b == b'"'
                    || b == b'\''
                    || b == b'<'
                    || b == b'>'
                    || b == b'\\'
                    || b == b'^'
                    || b == b'`'
                    || b == b'|' =>
                {
                    return Err(TemplateError::LiteralCharacter {
                        ch: b as char,
                        offset: i,
                    });
                }
                _ => {
                    literal.push(b);
                    i += 1;
                }
            }
        }
        if !literal.is_empty() {
            parts.push(Part::Literal(literal));
        }
        let nfa = Nfa::build(&parts);
        Ok(UriTemplate {
            source: source.to_owned(),
            parts,
            nfa,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// One expansion of the template: the first variable of every
    /// expression set to `value` (which should be unreserved characters), the
    /// others undefined. `emseepea test-source` uses it to name a resource
    /// that matches the template but was never listed.
    pub fn expand_first_variables(&self, value: &str) -> String {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Literal(bytes) => out.push_str(&String::from_utf8_lossy(bytes)),
                Part::Expression { op, vars } => {
                    if let Some(p) = op.prefix() {
                        out.push(p as char);
                    }
                    if matches!(op, Op::PathParam | Op::Query | Op::QueryContinuation) {
                        let name = vars
                            .first()
                            .map_or("", |v| v.split(['*', ':']).next().unwrap_or_default());
                        out.push_str(name);
                        out.push('=');
                    }
                    out.push_str(value);
                }
            }
        }
        out
    }

    /// Number of expressions (`{...}`) in the template.
    pub fn expression_count(&self) -> usize {
        self.parts
            .iter()
            .filter(|p| matches!(p, Part::Expression { .. }))
            .count()
    }

    /// Whether some expansion of the template is exactly `uri`: one pass
    /// over the URI, a bounded number of word operations per byte.
    pub fn matches(&self, uri: &str) -> bool {
        let nfa = &self.nfa;
        // Most templates start with a literal (`scheme://authority/path/`):
        // compare it directly and run the NFA from the state after it.
        let Some(rest) = uri.as_bytes().strip_prefix(&nfa.prefix[..]) else {
            return false;
        };
        if let Some(tail) = &nfa.tail {
            return tail.matches(rest);
        }
        let start = nfa.prefix.len();
        if nfa.words == 1 {
            nfa.run_small(start, rest)
        } else {
            nfa.run(start, rest)
        }
    }

    /// A URI both templates match, if there is one (then the two cannot
    /// both own their URIs). Exact: a breadth-first search of the product
    /// of the two NFAs for a reachable pair of accepting states; the URI
    /// returned is a shortest one.
    pub fn overlap(&self, other: &UriTemplate) -> Option<String> {
        self.nfa.intersect(&other.nfa)
    }
}

/// A set of bytes (a character class of the NFA).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct ByteSet([u64; 4]);

impl ByteSet {
    fn of(f: impl Fn(u8) -> bool) -> Self {
        let mut set = ByteSet::default();
        for b in 0..=255u8 {
            if f(b) {
                set.0[usize::from(b / 64)] |= 1 << (b % 64);
            }
        }
        set
    }

    fn contains(&self, b: u8) -> bool {
        self.0[usize::from(b / 64)] & (1 << (b % 64)) != 0
    }

    fn and(&self, other: &ByteSet) -> ByteSet {
        ByteSet(std::array::from_fn(|i| self.0[i] & other.0[i]))
    }

    /// A readable member, for the example URI of an overlap.
    fn example(&self) -> Option<u8> {
        (b'a'..=b'z')
            .chain(b'0'..=b'9')
            .chain(b'A'..=b'Z')
            .chain(0..=255)
            .find(|&b| self.contains(b))
    }
}

/// What a state does with a byte of its class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Go to the next state (a literal byte, an expression's first byte).
    Advance,
    /// Stay (an expression's further bytes).
    Stay,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct State {
    class: ByteSet,
    step: Step,
    /// The state reachable without input, if any: always a later one.
    epsilon: Option<usize>,
}

/// The template compiled: states in a line, `states.len()` accepting.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Nfa {
    states: Vec<State>,
    /// The template's leading literal (its states come first).
    prefix: Vec<u8>,
    /// Machine words of a state set (the accepting state included).
    words: usize,
    /// Bytes with the same effect on every state share a class.
    class_of: Box<[u8; 256]>,
    /// Per class: the states that advance on it, then those that stay
    /// (`words` each).
    masks: Vec<u64>,
    /// The states' `epsilon` moves in increasing order of origin: since each
    /// goes forward, one pass in this order closes a set.
    epsilon: Vec<(usize, usize)>,
    /// The NFA after the prefix, when that is one expression.
    tail: Option<Tail>,
}

/// A template that is a literal and then one expression, the usual shape
/// (`catalog://books/items/{id}`): after the prefix, the expression's two
/// states (its first byte, then the rest), whose run needs no state set.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Tail {
    first: ByteSet,
    rest: ByteSet,
    /// The expression may expand to nothing (the first state's epsilon).
    may_be_empty: bool,
}

impl Tail {
    fn matches(&self, input: &[u8]) -> bool {
        count_work(input.len());
        match input.split_first() {
            None => self.may_be_empty,
            Some((&b, more)) => {
                self.first.contains(b) && more.iter().all(|&b| self.rest.contains(b))
            }
        }
    }
}

impl Nfa {
    fn build(parts: &[Part]) -> Nfa {
        let mut states = Vec::new();
        for part in parts {
            match part {
                Part::Literal(bytes) => {
                    for &b in bytes {
                        states.push(State {
                            class: ByteSet::of(|x| x == b),
                            step: Step::Advance,
                            epsilon: None,
                        });
                    }
                }
                Part::Expression { op, .. } => {
                    let op = *op;
                    // The state after the expression: the next part's first.
                    let after = states.len() + 2;
                    let first = match op.prefix() {
                        Some(p) => ByteSet::of(|b| b == p),
                        None => ByteSet::of(|b| op.allows(b)),
                    };
                    states.push(State {
                        class: first,
                        step: Step::Advance,
                        epsilon: (!op.needs_content()).then_some(after),
                    });
                    states.push(State {
                        class: ByteSet::of(|b| op.allows(b) || op.prefix() == Some(b)),
                        step: Step::Stay,
                        epsilon: Some(after),
                    });
                }
            }
        }
        let words = (states.len() + 1).div_ceil(64);
        let mut class_of = Box::new([0u8; 256]);
        let mut masks = Vec::new();
        let mut classes: HashMap<Vec<u64>, u8> = HashMap::new();
        for b in 0..=255u8 {
            let mut column = vec![0u64; 2 * words];
            for (s, state) in states.iter().enumerate() {
                if state.class.contains(b) {
                    let half = match state.step {
                        Step::Advance => 0,
                        Step::Stay => words,
                    };
                    column[half + s / 64] |= 1 << (s % 64);
                }
            }
            // At most 256 columns, so a class index fits a byte.
            let next = classes.len() as u8;
            let class = *classes.entry(column.clone()).or_insert_with(|| {
                masks.extend_from_slice(&column);
                next
            });
            class_of[usize::from(b)] = class;
        }
        let epsilon = states
            .iter()
            .enumerate()
            .filter_map(|(s, state)| state.epsilon.map(|t| (s, t)))
            .collect();
        let prefix = match parts.first() {
            Some(Part::Literal(bytes)) => bytes.clone(),
            _ => Vec::new(),
        };
        let tail = match (states.len() == prefix.len() + 2, parts.last()) {
            (true, Some(Part::Expression { .. })) => {
                let (first, rest) = (&states[prefix.len()], &states[prefix.len() + 1]);
                Some(Tail {
                    first: first.class,
                    rest: rest.class,
                    may_be_empty: first.epsilon.is_some(),
                })
            }
            _ => None,
        };
        Nfa {
            states,
            prefix,
            words,
            class_of,
            masks,
            epsilon,
            tail,
        }
    }

    fn accept(&self) -> usize {
        self.states.len()
    }

    /// Add every state reachable without input.
    fn close(&self, set: &mut [u64]) {
        count_work(self.epsilon.len());
        for &(from, to) in &self.epsilon {
            if set[from / 64] & (1 << (from % 64)) != 0 {
                set[to / 64] |= 1 << (to % 64);
            }
        }
    }

    /// Up to 63 states: a state set is one machine word.
    fn run_small(&self, start: usize, input: &[u8]) -> bool {
        let close = |mut set: u64| {
            count_work(self.epsilon.len());
            for &(from, to) in &self.epsilon {
                set |= ((set >> from) & 1) << to;
            }
            set
        };
        let mut current = close(1 << start);
        for &b in input {
            count_work(2);
            let class = usize::from(self.class_of[usize::from(b)]);
            let (advance, stay) = (self.masks[2 * class], self.masks[2 * class + 1]);
            let next = ((current & advance) << 1) | (current & stay);
            if next == 0 {
                return false;
            }
            current = close(next);
        }
        current & (1 << self.accept()) != 0
    }

    fn run(&self, start: usize, input: &[u8]) -> bool {
        let words = self.words;
        let mut current = vec![0u64; words];
        current[start / 64] |= 1 << (start % 64);
        self.close(&mut current);
        let mut next = vec![0u64; words];
        for &b in input {
            count_work(2 * words);
            let class = usize::from(self.class_of[usize::from(b)]);
            let (advance, stay) = self.masks[2 * words * class..][..2 * words].split_at(words);
            let mut carry = 0;
            let mut any = 0;
            for w in 0..words {
                let moved = current[w] & advance[w];
                next[w] = (moved << 1) | carry | (current[w] & stay[w]);
                carry = moved >> 63;
                any |= next[w];
            }
            if any == 0 {
                return false;
            }
            self.close(&mut next);
            std::mem::swap(&mut current, &mut next);
        }
        let accept = self.accept();
        current[accept / 64] & (1 << (accept % 64)) != 0
    }

    /// The state after `state` consumes a byte of its class.
    fn target(&self, state: usize) -> usize {
        match self.states[state].step {
            Step::Advance => state + 1,
            Step::Stay => state,
        }
    }

    /// Search the product automaton: a pair of states moves on a byte both
    /// classes hold, or on either side's epsilon. A 0-1 breadth-first
    /// search (epsilon moves cost nothing), so the example found is as
    /// short as any URI both match.
    fn intersect(&self, other: &Nfa) -> Option<String> {
        const UNSEEN: u32 = u32::MAX;
        /// `via` of a pair reached without input.
        const EPSILON: u16 = 256;
        let width = other.accept() + 1;
        let pairs = (self.accept() + 1) * width;
        // Bounded templates: at most (512 + 1)^2 pairs.
        let mut distance = vec![UNSEEN; pairs];
        let mut parent = vec![0u32; pairs];
        let mut via = vec![EPSILON; pairs];
        let mut queue = VecDeque::new();
        distance[0] = 0;
        queue.push_back((0usize, 0usize));
        while let Some((a, b)) = queue.pop_front() {
            let here = a * width + b;
            if a == self.accept() && b == other.accept() {
                let mut uri = Vec::new();
                let mut at = here;
                while at != 0 {
                    if via[at] != EPSILON {
                        uri.push(via[at] as u8);
                    }
                    at = parent[at] as usize;
                }
                uri.reverse();
                // Both templates are UTF-8 and every class byte is ASCII,
                // so the example is too; lossy only as a precaution.
                return Some(String::from_utf8_lossy(&uri).into_owned());
            }
            let mut moves: [Option<(usize, usize, u16)>; 3] = [None; 3];
            if let Some(t) = self.states.get(a).and_then(|s| s.epsilon) {
                moves[0] = Some((t, b, EPSILON));
            }
            if let Some(t) = other.states.get(b).and_then(|s| s.epsilon) {
                moves[1] = Some((a, t, EPSILON));
            }
            if let (Some(x), Some(y)) = (self.states.get(a), other.states.get(b))
                && let Some(byte) = x.class.and(&y.class).example()
            {
                moves[2] = Some((self.target(a), other.target(b), u16::from(byte)));
            }
            for (ta, tb, label) in moves.into_iter().flatten() {
                let there = ta * width + tb;
                let cost = u32::from(label != EPSILON);
                if distance[here] + cost < distance[there] {
                    distance[there] = distance[here] + cost;
                    parent[there] = here as u32;
                    via[there] = label;
                    if cost == 0 {
                        queue.push_front((ta, tb));
                    } else {
                        queue.push_back((ta, tb));
                    }
                }
            }
        }
        None
    }
}

#[cfg(test)]
thread_local! {
    /// Word operations of the matcher on this thread, for the linearity test.
    static WORK: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

#[inline(always)]
fn count_work(_steps: usize) {
    #[cfg(test)]
    WORK.with(|w| w.set(w.get() + _steps));
}

fn parse_expression(body: &str, offset: usize) -> Result<Part, TemplateError> {
    let (op, rest) = match body.as_bytes().first() {
        Some(b'+') => (Op::Reserved, &body[1..]),
        Some(b'#') => (Op::Fragment, &body[1..]),
        Some(b'.') => (Op::Label, &body[1..]),
        Some(b'/') => (Op::Path, &body[1..]),
        Some(b';') => (Op::PathParam, &body[1..]),
        Some(b'?') => (Op::Query, &body[1..]),
        Some(b'&') => (Op::QueryContinuation, &body[1..]),
        Some(b'=' | b',' | b'!' | b'@' | b'|') => {
            return Err(TemplateError::ReservedOperator(offset));
        }
        _ => (Op::Simple, body),
    };
    let mut vars = Vec::new();
    for spec in rest.split(',') {
        let name = if let Some(n) = spec.strip_suffix('*') {
            n
        } else if let Some((n, len)) = spec.split_once(':') {
            let ok = !len.is_empty()
                && len.len() <= 4
                && len.bytes().all(|b| b.is_ascii_digit())
                && !len.starts_with('0');
            if !ok {
                return Err(TemplateError::PrefixModifier(offset));
            }
            n
        } else {
            spec
        };
        if name.is_empty()
            || !name.bytes().all(is_varchar)
            || name.starts_with('.')
            || name.ends_with('.')
        {
            return Err(TemplateError::VariableName {
                name: name.to_owned(),
                offset,
            });
        }
        vars.push(name.to_owned());
    }
    Ok(Part::Expression { op, vars })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn t(s: &str) -> UriTemplate {
        UriTemplate::parse(s).unwrap()
    }

    #[test]
    fn first_variable_expansions_match_their_template() {
        for src in [
            "learn://documents/{id}",
            "x://a{/path*}{?q,r}{&s}",
            "x://{+base}/v{.ext}{;p}{#frag}",
            "catalog://catalog/items/{id:10}",
        ] {
            let tpl = t(src);
            let uri = tpl.expand_first_variables("unlisted0");
            assert!(tpl.matches(&uri), "{src} -> {uri}");
        }
        assert_eq!(
            t("learn://documents/{id}").expand_first_variables("x"),
            "learn://documents/x"
        );
    }

    #[test]
    fn simple_expression_matches_one_segment() {
        let tpl = t("learn://documents/{id}");
        assert!(tpl.matches("learn://documents/42"));
        assert!(tpl.matches("learn://documents/a-b_c.d~e%20f"));
        assert!(!tpl.matches("learn://documents/"));
        assert!(!tpl.matches("learn://documents/a/b"));
        assert!(!tpl.matches("learn://document/42"));
        assert!(!tpl.matches("learn://documents/42?x"));
    }

    #[test]
    fn inner_expression() {
        let tpl = t("test://template/{id}/data");
        assert!(tpl.matches("test://template/123/data"));
        assert!(!tpl.matches("test://template//data"));
        assert!(!tpl.matches("test://template/1/2/data"));
        assert!(!tpl.matches("test://template/123/dat"));
    }

    #[test]
    fn operators() {
        assert!(t("file:///{+path}").matches("file:///a/b/c.txt"));
        assert!(t("x://h{/a,b}").matches("x://h/1/2"));
        assert!(t("x://h{/a,b}").matches("x://h"));
        assert!(t("x://h/s{?q,lang}").matches("x://h/s?q=a&lang=en"));
        assert!(t("x://h/s{?q}").matches("x://h/s"));
        assert!(!t("x://h/s{?q}").matches("x://h/s&q=1"));
        assert!(t("x://h/s{?q}{&r}").matches("x://h/s?q=1&r=2"));
        assert!(t("x://h{#frag}").matches("x://h#a/b"));
        assert!(t("x://h/{a}{.ext}").matches("x://h/file.tar.gz"));
        assert!(t("x://{a}-{b}").matches("x://1-2"));
        assert!(t("{+u}").matches("hostile://bbb/1"));
        assert!(t("x://é/{id}").matches("x://é/1"));
    }

    #[test]
    fn parse_errors() {
        assert!(UriTemplate::parse("x://{").is_err());
        assert!(UriTemplate::parse("x://}").is_err());
        assert!(UriTemplate::parse("x://{}").is_err());
        assert!(UriTemplate::parse("x://{a b}").is_err());
        assert!(UriTemplate::parse("x:// {a}").is_err());
        assert!(UriTemplate::parse("x://{=a}").is_err());
        assert!(UriTemplate::parse("x://{a:0}").is_err());
        assert!(UriTemplate::parse("x://{a:12}").is_ok());
        assert!(UriTemplate::parse("x://{a*}").is_ok());
        assert_eq!(t("x://{a}/{b}").expression_count(), 2);
    }

    /// A template of exactly `len` bytes with `expressions` expressions.
    fn sized(expressions: usize, len: usize) -> String {
        let mut s = "x://".to_string();
        for i in 0..expressions {
            s.push_str(&format!("{{v{i}}}"));
        }
        assert!(
            s.len() <= len,
            "{expressions} expressions need more than {len} bytes"
        );
        s.push_str(&"a".repeat(len - s.len()));
        s
    }

    #[test]
    fn templates_are_bounded_in_length_and_expressions() {
        let longest = sized(1, MAX_TEMPLATE_LEN);
        assert!(UriTemplate::parse(&longest).is_ok());
        let too_long = sized(1, MAX_TEMPLATE_LEN + 1);
        let e = UriTemplate::parse(&too_long).unwrap_err();
        assert_eq!(
            e,
            TemplateError::TooLong {
                len: MAX_TEMPLATE_LEN + 1,
                max: MAX_TEMPLATE_LEN
            }
        );
        assert!(e.is_bound());
        let most = sized(MAX_TEMPLATE_EXPRESSIONS, 100);
        assert_eq!(
            t(&most).expression_count(),
            MAX_TEMPLATE_EXPRESSIONS,
            "{most}"
        );
        let too_many = sized(MAX_TEMPLATE_EXPRESSIONS + 1, 100);
        let e = UriTemplate::parse(&too_many).unwrap_err();
        assert_eq!(
            e,
            TemplateError::TooManyExpressions {
                max: MAX_TEMPLATE_EXPRESSIONS
            }
        );
        assert!(e.is_bound());
        assert!(!UriTemplate::parse("x://{").unwrap_err().is_bound());
        // The template of the observed attack: 2,048 bytes, 682 expressions.
        let attack = "{a}".repeat(682) + "xx";
        assert!(UriTemplate::parse(&attack).unwrap_err().is_bound());
    }

    fn work<T>(f: impl FnOnce() -> T) -> (T, usize) {
        WORK.with(|w| w.set(0));
        let out = f();
        (out, WORK.with(|w| w.get()))
    }

    /// The matcher's work is at most a fixed number of word operations per
    /// URI byte, the same for the largest template the host accepts as for
    /// a small one: (states / 64 + 1) × 2 for the step, one per epsilon move
    /// (two per expression) for the closure.
    #[test]
    fn matching_costs_a_bounded_number_of_steps_per_byte() {
        let per_byte_bound = 2 * (MAX_TEMPLATE_LEN + 1).div_ceil(64) + 2 * MAX_TEMPLATE_EXPRESSIONS;
        // Every expression adjacent, so every state can be live at once;
        // the literal tail never matches, so nothing stops early.
        let mut worst = "x://".to_string();
        for i in 0..MAX_TEMPLATE_EXPRESSIONS {
            worst.push_str(&format!("{{+v{i}}}"));
        }
        worst.push_str(&"/end".repeat((MAX_TEMPLATE_LEN - worst.len()) / 4));
        let worst = t(&worst);
        assert!(worst.nfa.words > 1, "the big template runs the wide loop");
        let small = t("x://{a}{b}{c}{d}{e}{f}{g}/end");
        assert_eq!(small.nfa.words, 1);
        for tpl in [&worst, &small] {
            for len in [2_048, 300_000] {
                let uri = format!("x://{}", "a".repeat(len));
                let (matched, steps) = work(|| tpl.matches(&uri));
                assert!(!matched);
                assert!(
                    steps <= uri.len() * per_byte_bound + per_byte_bound,
                    "{} steps for {} bytes against {:?}",
                    steps,
                    uri.len(),
                    tpl.as_str()
                );
                // And it did look at the whole URI.
                assert!(steps >= uri.len() - 4, "{steps}");
            }
        }
    }

    #[test]
    fn hostile_input_is_linear() {
        let tpl = t("x://{a}{b}{c}{d}{e}{f}{g}/end");
        // A backtracking matcher would take ~100_000^7 steps here.
        let long = format!("x://{}", "a".repeat(100_000));
        assert!(!tpl.matches(&long));
    }

    /// `a` and `b` overlap, with an example both match.
    fn overlapping(a: &str, b: &str) -> String {
        let (ta, tb) = (t(a), t(b));
        let uri = ta
            .overlap(&tb)
            .unwrap_or_else(|| panic!("{a} and {b} should overlap"));
        assert!(ta.matches(&uri) && tb.matches(&uri), "{uri}");
        assert!(tb.overlap(&ta).is_some(), "symmetric");
        uri
    }

    fn disjoint(a: &str, b: &str) {
        let (ta, tb) = (t(a), t(b));
        assert_eq!(ta.overlap(&tb), None, "{a} vs {b}");
        assert_eq!(tb.overlap(&ta), None, "{b} vs {a}");
    }

    #[test]
    fn overlaps_of_tricky_pairs() {
        // The observed attack: aaa's template also matches bbb's URIs.
        assert_eq!(
            overlapping("hostile://{x}/{id}", "hostile://bbb/{id}"),
            "hostile://bbb/a"
        );
        // A catch-all takes everything, whatever its scheme.
        overlapping("{+u}", "hostile://bbb/{id}");
        overlapping("{+u}", "learn://documents/{id}");
        overlapping("{u}", "a{b}");
        disjoint("{u}", "x://a/{id}"); // simple expansion has no ':' or '/'
        // Disjoint literals.
        disjoint("a://x/{id}", "a://y/{id}");
        disjoint("learn://documents/{id}", "notes://notes/{id}");
        disjoint("catalog://catalog/items/{id}", "test://template/{id}/data");
        // `{id}` may contain '.', so it also matches `{id}.json`'s URIs.
        assert_eq!(overlapping("x://d/{id}", "x://d/{id}.json"), "x://d/a.json");
        // Reserved expansion crosses '/', simple expansion does not.
        overlapping("x://d/{+path}", "x://d/{id}");
        overlapping("x://d/{+path}", "x://d/{a}/{b}");
        disjoint("x://d/{+path}/meta", "x://d/{id}");
        disjoint("x://d/{id}", "x://d/{a}/{b}");
        overlapping("x://d/{id}/data", "x://d/{a}/{b}");
        // Empty expansions: both match plain `x://d`.
        assert_eq!(overlapping("x://d{/a}", "x://d{?q}"), "x://d");
        overlapping("x://d/{id}{?q}", "x://d/{id}");
        overlapping("x://d/{id}{.ext}", "x://d/{id}");
        disjoint("x://d/{#f}", "x://d/{id}");
        disjoint("x://d/{;p}", "x://d/{id}");
        overlapping("x://d/{;p}", "x://d/{+id}");
        // Percent-escapes are characters of simple expansions.
        assert_eq!(overlapping("x://d/{id}", "x://d/%41{x}"), "x://d/%41a");
        // Non-ASCII literals are never produced by an expansion.
        disjoint("x://é/{id}", "x://{h}/{id}");
        disjoint("x://é/{id}", "x://{+h}/{id}");
        overlapping("x://é/{id}", "x://é{+h}");
        // The same template overlaps itself.
        overlapping("learn://documents/{id}", "learn://documents/{id}");
    }

    /// The obvious backtracking matcher, as a reference for the NFA.
    fn reference(parts: &[Part], uri: &[u8]) -> bool {
        match parts.first() {
            None => uri.is_empty(),
            Some(Part::Literal(l)) => uri.starts_with(l) && reference(&parts[1..], &uri[l.len()..]),
            Some(Part::Expression { op, .. }) => {
                if !op.needs_content() && reference(&parts[1..], uri) {
                    return true;
                }
                let body = match op.prefix() {
                    Some(p) if uri.first() == Some(&p) => 1,
                    Some(_) => return false,
                    None => 0,
                };
                let mut end = body;
                while end < uri.len()
                    && (op.allows(uri[end]) || (end > 0 && op.prefix() == Some(uri[end])))
                {
                    end += 1;
                }
                // At least one character: the prefix, or the value itself.
                (1..=end).rev().any(|e| reference(&parts[1..], &uri[e..]))
            }
        }
    }

    /// Every string over `alphabet` of at most `max` characters.
    fn all_strings(alphabet: &[u8], max: usize) -> Vec<String> {
        let mut out = vec![String::new()];
        let mut last = vec![String::new()];
        for _ in 0..max {
            last = last
                .iter()
                .flat_map(|s| {
                    alphabet.iter().map(move |&c| {
                        let mut s = s.clone();
                        s.push(c as char);
                        s
                    })
                })
                .collect();
            out.extend(last.iter().cloned());
        }
        out
    }

    /// Bytes that tell every class of every operator apart.
    const ALPHABET: &[u8] = b"ab/.?&=#;:";

    fn small_template() -> impl Strategy<Value = String> {
        "([ab/.:?]{0,2}(\\{[+#./;?&]?v\\})?){1,3}"
    }

    proptest! {
        #[test]
        fn prop_the_nfa_agrees_with_backtracking(
            template in "([a-c/:.%]{0,3}(\\{[+#./;?&]?v(,w)?\\})?){1,5}",
            uri in "[a-c/:.?&=#;,%-]{0,16}",
        ) {
            if crate::fuzz::time_is_up() { return Ok(()); }
            if let Ok(t) = UriTemplate::parse(&template) {
                prop_assert_eq!(t.matches(&uri), reference(&t.parts, uri.as_bytes()), "{} vs {}", template, uri);
            }
        }

        /// A literal and one expression (the shape matched without the NFA's
        /// state sets) agrees too.
        #[test]
        fn prop_the_tail_agrees_with_backtracking(
            template in "[a-c/:.%]{0,4}\\{[+#./;?&]?v(,w)?\\}",
            uri in "[a-c/:.?&=#;,%-]{0,12}",
        ) {
            if crate::fuzz::time_is_up() { return Ok(()); }
            let t = UriTemplate::parse(&template).expect("a valid template");
            prop_assert!(t.nfa.tail.is_some());
            prop_assert_eq!(t.matches(&uri), reference(&t.parts, uri.as_bytes()), "{} vs {}", template, uri);
        }

        /// Long templates (the wide bitset loop) agree too.
        #[test]
        fn prop_the_wide_nfa_agrees_with_backtracking(
            head in "[a-c/]{64,80}",
            template in "([a-c/:.]{0,3}(\\{[+#./;?&]?v\\})?){1,5}",
            uri in "[a-c/:.?&=#;,]{0,12}",
        ) {
            if crate::fuzz::time_is_up() { return Ok(()); }
            let template = format!("{head}{template}");
            let uri = format!("{head}{uri}");
            if let Ok(t) = UriTemplate::parse(&template) {
                prop_assert!(t.nfa.words > 1);
                prop_assert_eq!(t.matches(&uri), reference(&t.parts, uri.as_bytes()), "{} vs {}", template, uri);
            }
        }

        #[test]
        fn prop_parse_and_match_never_panic(template in any::<String>(), uri in any::<String>()) {
            if crate::fuzz::time_is_up() { return Ok(()); }
            if let Ok(t) = UriTemplate::parse(&template) {
                t.matches(&uri);
                t.overlap(&t);
            }
        }

        #[test]
        fn prop_template_like_strings_never_panic(
            template in "[{}a-z+#./;?&=,!@|:*%0-9é -]{0,40}",
            other in "[{}a-z+#./;?&:*]{0,20}",
            uri in "[a-z/.?&=#;:%é]{0,40}",
        ) {
            if crate::fuzz::time_is_up() { return Ok(()); }
            if let Ok(t) = UriTemplate::parse(&template) {
                t.matches(&uri);
                if let Ok(o) = UriTemplate::parse(&other)
                    && let Some(example) = t.overlap(&o)
                {
                    prop_assert!(t.matches(&example) && o.matches(&example));
                }
            }
        }

        /// The product search agrees with trying every short string: any
        /// string both match means an overlap, and an overlap's example is
        /// matched by both.
        #[test]
        fn prop_overlap_agrees_with_brute_force(a in small_template(), b in small_template()) {
            if crate::fuzz::time_is_up() { return Ok(()); }
            let (Ok(ta), Ok(tb)) = (UriTemplate::parse(&a), UriTemplate::parse(&b)) else {
                return Ok(());
            };
            let found = all_strings(ALPHABET, 4)
                .into_iter()
                .find(|s| ta.matches(s) && tb.matches(s));
            match ta.overlap(&tb) {
                Some(example) => {
                    prop_assert!(ta.matches(&example) && tb.matches(&example), "{} vs {}: {}", a, b, example);
                    if let Some(found) = found {
                        // Shortest first: no longer than any other witness.
                        prop_assert!(example.len() <= found.len(), "{} vs {}: {} / {}", a, b, example, found);
                    }
                }
                None => prop_assert_eq!(found, None, "{} vs {}", a, b),
            }
        }
    }
}
