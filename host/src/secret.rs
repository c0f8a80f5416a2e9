//! Secrets in the configuration (`[auth.introspection] client_secret`, a
//! PostgreSQL `password` or `url`). Each can be written in one of three
//! forms, exactly one of them:
//!
//! - `KEY = "value"` inline;
//! - `KEY_file = "path"`: the file's contents (relative to the config
//!   file; one trailing newline dropped), as a Kubernetes Secret mounted as
//!   a volume gives it;
//! - `KEY_env = "VARIABLE"`: the environment variable's value.
//!
//! A [`Secret`] never shows its value: its `Debug` is `[redacted]`, it has
//! no `Display`, a type error names the key, not the value, and the memory
//! is zeroed when it is dropped (`secrecy`).

use secrecy::{ExposeSecret, SecretString};
use serde::de::{self, Deserializer, Visitor};
use std::fmt;
use std::path::{Path, PathBuf};

#[derive(Clone)]
pub struct Secret(SecretString);

impl Secret {
    pub fn new(value: String) -> Self {
        Self(SecretString::from(value))
    }

    /// The value, for the one place that hands it on (a driver, a request).
    pub fn expose(&self) -> &str {
        self.0.expose_secret()
    }
}

/// In the configuration's JSON Schema a secret is a string (its `_file` and
/// `_env` forms are keys of their own).
impl schemars::JsonSchema for Secret {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Secret".into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string", "writeOnly": true })
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// The error of a scalar that is not a string: serde's own would quote it
/// (`invalid type: integer `12345``). A table or an array is named by its
/// kind only, as serde does.
const NOT_A_STRING: &str = "expected a string (the value is not shown: it is a secret)";

struct SecretVisitor;

impl Visitor<'_> for SecretVisitor {
    type Value = Secret;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Secret, E> {
        Ok(Secret::new(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Secret, E> {
        Ok(Secret::new(v))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Secret, E> {
        Err(E::custom(NOT_A_STRING))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Secret, E> {
        Err(E::custom(NOT_A_STRING))
    }
    fn visit_i128<E: de::Error>(self, _: i128) -> Result<Secret, E> {
        Err(E::custom(NOT_A_STRING))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Secret, E> {
        Err(E::custom(NOT_A_STRING))
    }
    fn visit_u128<E: de::Error>(self, _: u128) -> Result<Secret, E> {
        Err(E::custom(NOT_A_STRING))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Secret, E> {
        Err(E::custom(NOT_A_STRING))
    }
    fn visit_bytes<E: de::Error>(self, _: &[u8]) -> Result<Secret, E> {
        Err(E::custom(NOT_A_STRING))
    }
}

impl<'de> serde::Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_string(SecretVisitor)
    }
}

/// Why a secret could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("{key}: give exactly one of {key}, {key}_file and {key}_env")]
    Forms { key: String },
    #[error("{key}: one of {key}, {key}_file or {key}_env is required")]
    Missing { key: String },
    #[error("{key}_file {}: {source}", path.display())]
    File {
        key: String,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{key}_file {}: not UTF-8", path.display())]
    NotUtf8 { key: String, path: PathBuf },
    #[error("{key}_env: the variable {var} is not set (or not UTF-8)")]
    Env { key: String, var: String },
}

/// The three forms of one secret as written.
pub struct Forms<'a> {
    /// Its key in the config, for errors (`auth.introspection.client_secret`).
    pub key: &'a str,
    pub inline: Option<Secret>,
    pub file: Option<PathBuf>,
    pub env: Option<String>,
}

impl Forms<'_> {
    /// The secret, from whichever form was given (a file relative to
    /// `base`); `None` if none was and it is optional.
    pub fn load(self, base: &Path, required: bool) -> Result<Option<Secret>, SecretError> {
        let key = self.key.to_owned();
        match (self.inline, self.file, self.env) {
            (Some(s), None, None) => Ok(Some(s)),
            (None, Some(file), None) => {
                let path = base.join(file);
                let bytes = std::fs::read(&path).map_err(|source| SecretError::File {
                    key: key.clone(),
                    path: path.clone(),
                    source,
                })?;
                let mut text =
                    String::from_utf8(bytes).map_err(|_| SecretError::NotUtf8 { key, path })?;
                // `echo secret > file` and most editors end it with a newline.
                if text.ends_with('\n') {
                    text.pop();
                    if text.ends_with('\r') {
                        text.pop();
                    }
                }
                Ok(Some(Secret::new(text)))
            }
            (None, None, Some(var)) => match std::env::var(&var) {
                Ok(v) => Ok(Some(Secret::new(v))),
                Err(_) => Err(SecretError::Env { key, var }),
            },
            (None, None, None) if required => Err(SecretError::Missing { key }),
            (None, None, None) => Ok(None),
            _ => Err(SecretError::Forms { key }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    struct T {
        #[allow(dead_code)]
        password: Secret,
    }

    #[test]
    fn a_secret_never_shows_its_value() {
        let t: T = toml::from_str("password = \"hunter2\"").unwrap();
        assert_eq!(t.password.expose(), "hunter2");
        assert!(!format!("{t:?}").contains("hunter2"), "{t:?}");
        for wrong in ["password = 12345", "password = true", "password = 1.5"] {
            let e = toml::from_str::<T>(wrong).unwrap_err();
            assert!(
                !e.message().contains("12345") && !e.message().contains("true"),
                "{e}"
            );
            assert!(e.message().contains("not shown"), "{e}");
        }
    }

    #[test]
    fn exactly_one_form() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("pw"), "from-file\n").unwrap();
        let forms = |inline: Option<&str>, file: Option<&str>, env: Option<&str>| Forms {
            key: "x.password",
            inline: inline.map(|s| Secret::new(s.into())),
            file: file.map(PathBuf::from),
            env: env.map(String::from),
        };
        let got = |f: Forms| {
            f.load(dir.path(), true)
                .map(|s| s.unwrap().expose().to_owned())
        };
        assert_eq!(got(forms(Some("a"), None, None)).unwrap(), "a");
        assert_eq!(got(forms(None, Some("pw"), None)).unwrap(), "from-file");
        // SAFETY: no other thread of this test reads this variable.
        unsafe { std::env::set_var("EMSEEPEA_TEST_SECRET_FORMS", "from-env") };
        assert_eq!(
            got(forms(None, None, Some("EMSEEPEA_TEST_SECRET_FORMS"))).unwrap(),
            "from-env"
        );
        let e = got(forms(Some("a"), Some("pw"), None)).unwrap_err();
        assert!(e.to_string().contains("exactly one of x.password"), "{e}");
        let e = got(forms(None, None, None)).unwrap_err();
        assert!(e.to_string().contains("is required"), "{e}");
        assert!(
            forms(None, None, None)
                .load(dir.path(), false)
                .unwrap()
                .is_none()
        );
        let e = got(forms(None, None, Some("EMSEEPEA_TEST_SECRET_UNSET"))).unwrap_err();
        assert!(e.to_string().contains("EMSEEPEA_TEST_SECRET_UNSET"), "{e}");
        let e = got(forms(None, Some("missing"), None)).unwrap_err();
        assert!(e.to_string().contains("x.password_file"), "{e}");
    }
}
