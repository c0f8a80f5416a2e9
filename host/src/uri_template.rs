//! RFC 6570 URI templates: parsing (levels 1–4 syntax) and matching a
//! concrete URI against a template, which the host needs twice: to route
//! `resources/read` to the first template that matches, and to check that
//! every URI a guest lists is "consistent with its registered template".
//!
//! Matching asks "could some expansion of this template produce this URI?".
//! Each expression may produce the characters its operator can emit (simple
//! expansion only unreserved characters, percent-escapes and `,`; `+`/`#`
//! any URI character; `/ . ; ? &` their prefix then their separators).
//! Simple and `+` expressions must produce at least one character: an empty
//! path segment never identifies a resource. Matching is a linear-time NFA
//! walk over the URI (no backtracking blow-up on hostile input).

use std::fmt;

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

/// `Op::allows_slow` for every operator and byte, computed at compile time.
static ALLOWED: [[bool; 256]; 8] = {
    let ops = [
        Op::Simple,
        Op::Reserved,
        Op::Fragment,
        Op::Label,
        Op::Path,
        Op::PathParam,
        Op::Query,
        Op::QueryContinuation,
    ];
    let mut table = [[false; 256]; 8];
    let mut o = 0;
    while o < 8 {
        let mut b = 0;
        while b < 256 {
            table[o][b] = ops[o].allows_const(b as u8);
            b += 1;
        }
        o += 1;
    }
    table
};

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

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError(pub String);

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TemplateError {}

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

    /// Characters an expansion may contain after its prefix (table lookup:
    /// this runs for every byte of every URI a guest lists).
    fn allows(self, b: u8) -> bool {
        ALLOWED[self as usize][b as usize]
    }

    const fn allows_const(self, b: u8) -> bool {
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
    pub fn parse(source: &str) -> Result<Self, TemplateError> {
        let bytes = source.as_bytes();
        let mut parts = Vec::new();
        let mut literal = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            match b {
                b'{' => {
                    let end = source[i..].find('}').map(|e| i + e).ok_or_else(|| {
                        TemplateError(format!("unclosed expression at offset {i}"))
                    })?;
                    if !literal.is_empty() {
                        parts.push(Part::Literal(std::mem::take(&mut literal)));
                    }
                    parts.push(parse_expression(&source[i + 1..end], i)?);
                    i = end + 1;
                }
                b'}' => return Err(TemplateError(format!("unexpected '}}' at offset {i}"))),
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
                    return Err(TemplateError(format!(
                        "character {:?} not allowed in a template literal",
                        b as char
                    )));
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
    /// over the URI with a bitset of NFA states (no backtracking, no
    /// allocation beyond two small bitsets).
    pub fn matches(&self, uri: &str) -> bool {
        let nfa = &self.nfa;
        // Most templates start with a literal (`scheme://authority/path/`):
        // compare it directly and run the NFA from the first expression.
        let Some(rest) = uri.as_bytes().strip_prefix(&nfa.prefix[..]) else {
            return false;
        };
        let start = nfa.prefix.len();
        if nfa.words == 1 {
            return nfa.run_small(start, rest);
        }
        nfa.run(start, rest)
    }
}

/// The template compiled to an NFA: one state per literal byte, two per
/// expression (nothing consumed yet / inside), and an accepting state.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Nfa {
    /// The template's leading literal (its states come first).
    prefix: Vec<u8>,
    /// `closure` as single words, when every set fits in one.
    closure_small: Vec<u64>,
    states: Vec<NfaState>,
    /// For each state (and the accepting one), the states reachable without
    /// consuming input, as a bitset.
    closure: Vec<Vec<u64>>,
    words: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NfaState {
    /// Expects this byte, then goes to `next`.
    Literal { byte: u8, next: usize },
    /// An expression's start: consumes its prefix (or first character).
    Entry { op: Op, inside: usize },
    /// Inside an expression: consumes more of its characters.
    Inside { op: Op },
}

impl Nfa {
    fn build(parts: &[Part]) -> Nfa {
        let mut states = Vec::new();
        let mut entries = Vec::new();
        for part in parts {
            entries.push(states.len());
            match part {
                Part::Literal(bytes) => {
                    for &b in bytes {
                        let next = states.len() + 1;
                        states.push(NfaState::Literal { byte: b, next });
                    }
                }
                Part::Expression { op, .. } => {
                    let inside = states.len() + 1;
                    states.push(NfaState::Entry { op: *op, inside });
                    states.push(NfaState::Inside { op: *op });
                }
            }
        }
        let accept = states.len();
        let words = (accept + 1).div_ceil(64);
        let mut closure = vec![vec![0u64; words]; accept + 1];
        let set = |c: &mut Vec<u64>, i: usize| c[i / 64] |= 1 << (i % 64);
        set(&mut closure[accept], accept);
        // Backwards, so a part's closure can include the next part's entry.
        for (j, part) in parts.iter().enumerate().rev() {
            let entry = entries[j];
            let after = entries.get(j + 1).copied().unwrap_or(accept);
            let after_closure = closure[after].clone();
            match part {
                Part::Literal(bytes) => {
                    for i in 0..bytes.len() {
                        set(&mut closure[entry + i], entry + i);
                    }
                }
                Part::Expression { op, .. } => {
                    // Inside: may stop here and go on with the next part.
                    let mut inside = after_closure.clone();
                    set(&mut inside, entry + 1);
                    closure[entry + 1] = inside;
                    let mut start = vec![0u64; words];
                    set(&mut start, entry);
                    if !op.needs_content() {
                        for (s, a) in start.iter_mut().zip(&after_closure) {
                            *s |= a;
                        }
                    }
                    closure[entry] = start;
                }
            }
        }
        let prefix = match parts.first() {
            Some(Part::Literal(bytes)) => bytes.clone(),
            _ => Vec::new(),
        };
        let closure_small = if words == 1 {
            closure.iter().map(|c| c[0]).collect()
        } else {
            Vec::new()
        };
        Nfa {
            prefix,
            closure_small,
            states,
            closure,
            words,
        }
    }

    fn accepts(&self, set: &[u64]) -> bool {
        let accept = self.states.len();
        set[accept / 64] & (1 << (accept % 64)) != 0
    }

    /// Up to 63 states: the state set is one machine word.
    fn run_small(&self, start: usize, input: &[u8]) -> bool {
        let closure = &self.closure_small;
        let mut current = closure[start];
        for &b in input {
            let mut next = 0u64;
            let mut bits = current;
            while bits != 0 {
                let s = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if let Some(t) = self.step(s, b) {
                    next |= closure[t];
                }
            }
            if next == 0 {
                return false;
            }
            current = next;
        }
        self.accepts(&[current])
    }

    fn run(&self, start: usize, input: &[u8]) -> bool {
        let mut current = self.closure[start].clone();
        let mut next = vec![0u64; self.words];
        for &b in input {
            next.iter_mut().for_each(|w| *w = 0);
            let mut any = false;
            for (wi, &word) in current.iter().enumerate() {
                let mut bits = word;
                while bits != 0 {
                    let s = wi * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    if let Some(t) = self.step(s, b) {
                        for (n, c) in next.iter_mut().zip(&self.closure[t]) {
                            *n |= c;
                        }
                        any = true;
                    }
                }
            }
            if !any {
                return false;
            }
            std::mem::swap(&mut current, &mut next);
        }
        self.accepts(&current)
    }

    fn step(&self, state: usize, b: u8) -> Option<usize> {
        match *self.states.get(state)? {
            NfaState::Literal { byte, next } => (byte == b).then_some(next),
            NfaState::Entry { op, inside } => {
                let ok = match op.prefix() {
                    Some(p) => b == p,
                    None => op.allows(b),
                };
                ok.then_some(inside)
            }
            NfaState::Inside { op } => (op.allows(b) || op.prefix() == Some(b)).then_some(state),
        }
    }
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
            return Err(TemplateError(format!(
                "reserved operator in expression at offset {offset}"
            )));
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
                return Err(TemplateError(format!(
                    "bad prefix modifier in expression at offset {offset}"
                )));
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
            return Err(TemplateError(format!(
                "bad variable name {name:?} in expression at offset {offset}"
            )));
        }
        vars.push(name.to_owned());
    }
    Ok(Part::Expression { op, vars })
}

#[cfg(test)]
mod tests {
    use super::*;

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

    proptest::proptest! {
        #[test]
        fn the_nfa_agrees_with_backtracking(
            template in "([a-c/:.]{0,3}(\\{[+#./;?&]?v\\})?){1,4}",
            uri in "[a-c/:.?&=#;,%-]{0,12}",
        ) {
            if let Ok(t) = UriTemplate::parse(&template) {
                proptest::prop_assert_eq!(t.matches(&uri), reference(&t.parts, uri.as_bytes()), "{} vs {}", template, uri);
            }
        }
    }

    #[test]
    fn hostile_input_is_linear() {
        let tpl = t("x://{a}{b}{c}{d}{e}{f}{g}/end");
        // A backtracking matcher would take ~100_000^7 steps here; the NFA
        // walk finishes at once (a regression shows up as a hung test).
        let long = format!("x://{}", "a".repeat(100_000));
        assert!(!tpl.matches(&long));
    }
}
