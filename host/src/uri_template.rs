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

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError(pub String);

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TemplateError {}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

fn is_reserved(b: u8) -> bool {
    matches!(b, b':' | b'/' | b'?' | b'#' | b'[' | b']' | b'@' | b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'=')
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
    pub fn parse(source: &str) -> Result<Self, TemplateError> {
        let bytes = source.as_bytes();
        let mut parts = Vec::new();
        let mut literal = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            match b {
                b'{' => {
                    let end = source[i..]
                        .find('}')
                        .map(|e| i + e)
                        .ok_or_else(|| TemplateError(format!("unclosed expression at offset {i}")))?;
                    if !literal.is_empty() {
                        parts.push(Part::Literal(std::mem::take(&mut literal)));
                    }
                    parts.push(parse_expression(&source[i + 1..end], i)?);
                    i = end + 1;
                }
                b'}' => return Err(TemplateError(format!("unexpected '}}' at offset {i}"))),
                b if b.is_ascii_control() || b == b' ' || b == b'"' || b == b'\'' || b == b'<' || b == b'>' || b == b'\\' || b == b'^' || b == b'`' || b == b'|' => {
                    return Err(TemplateError(format!("character {:?} not allowed in a template literal", b as char)));
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
        Ok(UriTemplate { source: source.to_owned(), parts })
    }

    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Number of expressions (`{...}`) in the template.
    pub fn expression_count(&self) -> usize {
        self.parts.iter().filter(|p| matches!(p, Part::Expression { .. })).count()
    }

    /// Whether some expansion of the template is exactly `uri`.
    pub fn matches(&self, uri: &str) -> bool {
        // NFA states: (part index, offset in part). For an expression the
        // offset is 0 = nothing consumed yet, 1 = prefix/first char consumed.
        let n = self.parts.len();
        let mut current = vec![false; (n + 1) * 2];
        let mut next = vec![false; (n + 1) * 2];
        // Literal offsets need more than two slots; track them separately.
        let lit_len: Vec<usize> = self.parts.iter().map(|p| if let Part::Literal(l) = p { l.len() } else { 0 }).collect();
        let mut lit_pos: Vec<Vec<bool>> = lit_len.iter().map(|l| vec![false; l + 1]).collect();
        let mut lit_next: Vec<Vec<bool>> = lit_pos.clone();

        fn close(parts: &[Part], current: &mut [bool], lit_pos: &mut [Vec<bool>]) {
            // Epsilon moves: a finished part enters the next part.
            for idx in 0..parts.len() {
                let done = match &parts[idx] {
                    Part::Literal(l) => lit_pos[idx][l.len()],
                    Part::Expression { op, .. } => current[idx * 2 + 1] || (!op.needs_content() && current[idx * 2]),
                };
                if done {
                    match parts.get(idx + 1) {
                        Some(Part::Literal(_)) => lit_pos[idx + 1][0] = true,
                        Some(Part::Expression { .. }) => current[(idx + 1) * 2] = true,
                        None => current[parts.len() * 2] = true,
                    }
                }
            }
        }

        match self.parts.first() {
            Some(Part::Literal(_)) => lit_pos[0][0] = true,
            Some(Part::Expression { .. }) => current[0] = true,
            None => current[n * 2] = true,
        }
        close(&self.parts, &mut current, &mut lit_pos);
        for &b in uri.as_bytes() {
            next.iter_mut().for_each(|s| *s = false);
            lit_next.iter_mut().for_each(|v| v.iter_mut().for_each(|s| *s = false));
            let mut any = false;
            for (idx, part) in self.parts.iter().enumerate() {
                match part {
                    Part::Literal(l) => {
                        for off in 0..l.len() {
                            if lit_pos[idx][off] && l[off] == b {
                                lit_next[idx][off + 1] = true;
                                any = true;
                            }
                        }
                    }
                    Part::Expression { op, .. } => {
                        let start = current[idx * 2];
                        let inside = current[idx * 2 + 1];
                        let enters = match op.prefix() {
                            Some(p) => start && b == p,
                            None => start && op.allows(b),
                        };
                        if enters || (inside && (op.allows(b) || op.prefix() == Some(b))) {
                            next[idx * 2 + 1] = true;
                            any = true;
                        }
                    }
                }
            }
            if !any {
                return false;
            }
            std::mem::swap(&mut current, &mut next);
            std::mem::swap(&mut lit_pos, &mut lit_next);
            close(&self.parts, &mut current, &mut lit_pos);
        }
        current[n * 2]
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
            return Err(TemplateError(format!("reserved operator in expression at offset {offset}")));
        }
        _ => (Op::Simple, body),
    };
    let mut vars = Vec::new();
    for spec in rest.split(',') {
        let name = if let Some(n) = spec.strip_suffix('*') {
            n
        } else if let Some((n, len)) = spec.split_once(':') {
            let ok = !len.is_empty() && len.len() <= 4 && len.bytes().all(|b| b.is_ascii_digit()) && !len.starts_with('0');
            if !ok {
                return Err(TemplateError(format!("bad prefix modifier in expression at offset {offset}")));
            }
            n
        } else {
            spec
        };
        if name.is_empty() || !name.bytes().all(is_varchar) || name.starts_with('.') || name.ends_with('.') {
            return Err(TemplateError(format!("bad variable name {name:?} in expression at offset {offset}")));
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

    #[test]
    fn hostile_input_is_linear() {
        let tpl = t("x://{a}{b}{c}{d}{e}{f}{g}/end");
        // A backtracking matcher would take ~100_000^7 steps here; the NFA
        // walk finishes at once (a regression shows up as a hung test).
        let long = format!("x://{}", "a".repeat(100_000));
        assert!(!tpl.matches(&long));
    }
}
