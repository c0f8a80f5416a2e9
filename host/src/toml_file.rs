//! Reading TOML (the server's config, a source's manifest) into one-line
//! errors. A leaf: the config composer and the runtime's loader both use it.

use serde::de::DeserializeOwned;

/// `text` as a `T`, or one line saying where, which key and what is wrong.
/// TOML's own message quotes the offending line, and serde's the offending
/// value: a secret written with the wrong type would be echoed to the log
/// or a CI console. So the line is given by number, the key by its path,
/// and a secret's type error by its kind only (`secret.rs`).
pub fn parse_toml<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    let at = |span: Option<std::ops::Range<usize>>| match span {
        Some(span) => {
            let line = text.as_bytes()[..span.start.min(text.len())]
                .iter()
                .filter(|&&b| b == b'\n')
                .count();
            format!("line {}: ", line + 1)
        }
        None => String::new(),
    };
    let de = toml::Deserializer::parse(text)
        .map_err(|e| format!("{}{}", at(e.span()), one_line(e.message())))?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let key = e.path().to_string();
        let inner = e.into_inner();
        let message = match key.as_str() {
            "" | "." => format!("{}{}", at(inner.span()), inner.message()),
            key => format!("{}{key}: {}", at(inner.span()), inner.message()),
        };
        // A quoted key may hold a newline too.
        one_line(&message)
    })
}

/// TOML errors span several lines with a source excerpt; startup errors are one line.
pub fn one_line(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}
