//! Property tests of the config and manifest loaders (`prop_*`, see crate::fuzz).

use super::*;
use crate::fuzz::{text, time_is_up};
use proptest::prelude::*;

/// Keys of the config and manifest schemas, so that generated text
/// reaches deserialization and validation, not only the TOML parser.
const KEYS: &[&str] = &[
    "listen",
    "sources_dir",
    "state_dir",
    "cache_dir",
    "max_application_result_bytes",
    "max_read_bytes",
    "instructions",
    "endpoint",
    "request_timeout_ms",
    "max_body_bytes",
    "allowed_origins",
    "allowed_hosts",
    "shutdown_grace_ms",
    "max_sessions",
    "session_idle_timeout_s",
    "fuel",
    "max_duration_ms",
    "memory_bytes",
    "epoch_tick_us",
    "max_concurrent_calls",
    "max_memory_bytes",
    "keep_resident_bytes",
    "pagemap_scan",
    "perf_map",
    "pin",
    "idle_trim_s",
    "page_size",
    "max_page_bytes",
    "mode",
    "public_discovery",
    "resource",
    "authorization_servers",
    "subject_claim",
    "leeway_s",
    "max_token_bytes",
    "cache_entries",
    "issuer",
    "jwks_file",
    "jwks_url",
    "jwks_refresh_interval_s",
    "required_typ",
    "client_id",
    "client_secret",
    "client_secret_file",
    "client_secret_env",
    "allow_plain_http",
    "follow_client_sampled",
    "timeout_ms",
    "uri",
    "name",
    "title",
    "description",
    "mimeType",
    "access",
    "requiredScopes",
    "text",
    "blob",
    "file",
    "read_only",
    "max_result_bytes",
    "path",
    "databases",
    "directories",
    "http",
    "max_request_bytes",
    "max_response_bytes",
];
const SECTIONS: &[&str] = &[
    "[http]",
    "[budget]",
    "[runtime]",
    "[list_pagination]",
    "[auth]",
    "[auth.jwt]",
    "[auth.introspection]",
    "[[resources]]",
    "[databases.main]",
    "[directories.docs]",
    "[config]",
    "[grants]",
    "[grants.http_limits]",
    "[[grants]]",
    "[budget.fuel]",
];

fn toml_value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        (0u64..3000).prop_map(|n| n.to_string()),
        Just("18446744073709551616".to_owned()),
        Just("-0".to_owned()),
        any::<f64>().prop_map(|f| format!("{f:?}")),
        Just("inf".to_owned()),
        Just("nan".to_owned()),
        any::<bool>().prop_map(|b| b.to_string()),
        text().prop_map(|s| toml::Value::String(s).to_string()),
        prop_oneof![
            Just("none"),
            Just("dev"),
            Just("jwt"),
            Just("introspection"),
            Just("protected"),
            Just("127.0.0.1:0"),
            Just("[::1]:8080"),
            Just("/mcp"),
            Just("x://y/{id}")
        ]
        .prop_map(|s| format!("\"{s}\"")),
        Just("1979-05-27T07:32:00Z".to_owned()),
        "[ -~]{0,12}",
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4)
                .prop_map(|v| format!("[{}]", v.join(", "))),
            proptest::collection::vec((key(), inner), 0..3).prop_map(|v| {
                let members: Vec<String> =
                    v.into_iter().map(|(k, v)| format!("{k} = {v}")).collect();
                format!("{{ {} }}", members.join(", "))
            }),
        ]
    })
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(KEYS).prop_map(String::from),
        1 => "[a-z_]{1,10}",
        1 => text().prop_map(|s| toml::Value::String(s).to_string()),
    ]
}

fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => proptest::sample::select(SECTIONS).prop_map(String::from),
        6 => (key(), toml_value()).prop_map(|(k, v)| format!("{k} = {v}")),
        1 => "\\PC{0,30}",
        1 => ".{0,30}",
        1 => "[\\[\\]{}=\"'#., a-z0-9\\n]{0,30}",
    ]
}

/// TOML-ish text: mostly well-formed lines of the schema's keys and
/// sections with values of every type, some garbage.
fn toml_ish() -> impl Strategy<Value = String> {
    (any::<bool>(), proptest::collection::vec(line(), 0..14)).prop_map(|(base, lines)| {
        let head = if base {
            "sources_dir = 's'\nstate_dir = 't'\n"
        } else {
            ""
        };
        format!("{head}{}\n", lines.join("\n"))
    })
}

/// An error names the file first, on one line.
fn names_the_file(
    at: &Path,
    shown: String,
    reason: String,
    file: &Path,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(at, file);
    prop_assert!(
        shown.starts_with(&format!("{}: ", file.display())),
        "{}",
        shown
    );
    prop_assert!(!shown.contains('\n'), "{}", shown);
    prop_assert!(!reason.is_empty());
    Ok(())
}

proptest! {
    /// Any TOML-ish text or any bytes give a config, or a typed error
    /// naming the file. Never a panic.
    #[test]
    fn prop_config_text_gives_a_config_or_an_error_naming_the_file(
        bytes in prop_oneof![
            8 => toml_ish().prop_map(String::into_bytes),
            1 => proptest::collection::vec(any::<u8>(), 0..200),
            1 => (1usize..300).prop_map(|n| format!("sources_dir = 's'\nstate_dir = 't'\nx = {}1{}\n", "[".repeat(n), "]".repeat(n)).into_bytes()),
        ],
    ) {
        if time_is_up() { return Ok(()); }
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("emseepea.toml");
        std::fs::write(&file, &bytes).unwrap();
        match Config::load(&file) {
            Ok(c) => prop_assert_eq!(&c.file, &file),
            Err(e) => {
                let utf8 = std::str::from_utf8(&bytes).is_ok();
                prop_assert_eq!(matches!(e, ConfigError::Read { .. }), !utf8, "{}", e);
                names_the_file(e.path(), e.to_string(), e.reason(), &file)?;
            }
        }
    }

    /// The same for source manifests.
    #[test]
    fn prop_manifest_text_gives_a_manifest_or_an_error_naming_the_file(
        bytes in prop_oneof![
            8 => toml_ish().prop_map(String::into_bytes),
            1 => proptest::collection::vec(any::<u8>(), 0..200),
        ],
    ) {
        if time_is_up() { return Ok(()); }
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("source.toml");
        std::fs::write(&file, &bytes).unwrap();
        if let Err(e) = SourceManifest::load(&file) {
            names_the_file(e.path(), e.to_string(), e.reason(), &file)?;
        }
    }

    /// A valid config written out as TOML loads back to exactly the
    /// values written (strings of any characters included).
    #[test]
    fn prop_valid_configs_round_trip(
        v in valid_config(),
    ) {
        if time_is_up() { return Ok(()); }
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("emseepea.toml");
        std::fs::write(&file, toml::to_string(&v.table()).unwrap()).unwrap();
        let c = Config::load(&file).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(c.listen, v.listen);
        prop_assert_eq!(&c.sources_dir, &dir.path().join(&v.sources_dir));
        prop_assert_eq!(&c.state_dir, &dir.path().join(&v.state_dir));
        prop_assert_eq!(c.cache_dir, Some(dir.path().join(&v.state_dir).join("precompiled")));
        prop_assert_eq!(&c.http.endpoint, &v.endpoint);
        prop_assert_eq!(c.http.request_timeout_ms, v.request_timeout_ms);
        prop_assert_eq!(&c.http.allowed_origins, &v.allowed_origins);
        prop_assert_eq!(c.budget, v.budget);
        prop_assert_eq!(c.runtime.max_memory_bytes, v.max_memory_bytes);
        prop_assert_eq!(c.runtime.max_concurrent_calls, v.max_concurrent_calls);
        prop_assert_eq!(c.list_pagination.page_size, v.page_size);
        prop_assert_eq!(c.list_pagination.max_page_bytes, v.max_page_bytes);
        prop_assert_eq!(c.max_application_result_bytes, v.max_application_result_bytes);
        prop_assert_eq!(
            matches!(c.auth.method, AuthMethod::Dev),
            v.mode == AuthMode::Dev
        );
        prop_assert_eq!(&c.auth.subject_claim, &v.subject_claim);
        prop_assert_eq!(c.auth.leeway_s, v.leeway_s);
        prop_assert_eq!(&c.instructions, &v.instructions);
        prop_assert_eq!(c.resources.len(), v.resources.len());
        for (r, (uri, name, body, protected)) in c.resources.iter().zip(&v.resources) {
            prop_assert_eq!(&r.uri, uri);
            prop_assert_eq!(&r.name, name);
            prop_assert_eq!(&r.body, &StaticBody::Text(body.clone()));
            let access = if *protected { AccessConfig::Protected } else { AccessConfig::Public };
            prop_assert_eq!(r.access, access);
        }
        let dirs: Vec<(&String, PathBuf)> = v.directories.iter().map(|(k, p)| (k, dir.path().join(p))).collect();
        let loaded: Vec<(&String, PathBuf)> = c.directories.iter().map(|(k, d)| (k, d.path.clone())).collect();
        prop_assert_eq!(loaded, dirs);
    }
}

/// The values of a valid config, and their TOML.
#[derive(Debug, Clone)]
struct ValidConfig {
    listen: SocketAddr,
    sources_dir: String,
    state_dir: String,
    endpoint: String,
    request_timeout_ms: u64,
    allowed_origins: Vec<String>,
    budget: BudgetConfig,
    max_memory_bytes: u64,
    max_concurrent_calls: u32,
    page_size: u32,
    max_page_bytes: usize,
    max_application_result_bytes: usize,
    mode: AuthMode,
    subject_claim: String,
    leeway_s: u64,
    instructions: Option<String>,
    resources: Vec<(String, String, String, bool)>,
    directories: BTreeMap<String, String>,
}

/// TOML integers are i64.
const MAX_INT: u64 = i64::MAX as u64;

fn valid_config() -> impl Strategy<Value = ValidConfig> {
    let path = "[a-z]{1,8}(/[a-z.]{1,8}){0,2}";
    let listen = (any::<[u8; 4]>(), any::<u16>(), any::<bool>()).prop_map(|(ip, port, v6)| {
        if v6 {
            SocketAddr::from((
                std::net::Ipv6Addr::from([ip[0] as u16, 0, 0, 0, 0, 0, ip[1] as u16, ip[2] as u16]),
                port,
            ))
        } else {
            SocketAddr::from((ip, port))
        }
    });
    let sizes = (
        1u64..MAX_INT,
        1u64..MAX_INT,
        1u32..=u32::MAX,
        1u32..=MAX_PAGE_SIZE,
        1024usize..(MAX_INT as usize),
        1024usize..(MAX_INT as usize),
    );
    (
        (
            listen,
            path,
            path,
            "/[a-z/._~-]{0,12}",
            1u64..MAX_INT,
            proptest::collection::vec(text(), 0..3),
        ),
        sizes,
        (1u64..MAX_INT, 1u64..MAX_INT, any::<prop::sample::Index>()),
        (
            prop_oneof![Just(AuthMode::None), Just(AuthMode::Dev)],
            text(),
            0u64..=MAX_LEEWAY_S,
            proptest::option::of(text()),
        ),
        proptest::collection::vec((text(), text(), text(), any::<bool>()), 0..3),
        proptest::collection::btree_map("[a-z][a-z0-9_-]{0,6}", path, 0..3),
    )
        .prop_map(
            |(
                (listen, sources_dir, state_dir, endpoint, request_timeout_ms, allowed_origins),
                (
                    max_memory_bytes,
                    _,
                    max_concurrent_calls,
                    page_size,
                    max_page_bytes,
                    max_application_result_bytes,
                ),
                (fuel, max_duration_ms, memory),
                (mode, subject_claim, leeway_s, instructions),
                resources,
                directories,
            )| ValidConfig {
                listen,
                sources_dir,
                state_dir,
                endpoint,
                request_timeout_ms,
                allowed_origins,
                budget: BudgetConfig {
                    fuel,
                    max_duration_ms,
                    memory_bytes: 1 + memory.index(max_memory_bytes as usize) as u64,
                },
                max_memory_bytes,
                max_concurrent_calls,
                page_size,
                max_page_bytes,
                max_application_result_bytes,
                mode,
                subject_claim,
                leeway_s,
                instructions,
                resources,
                directories,
            },
        )
}

impl ValidConfig {
    fn table(&self) -> toml::Table {
        use toml::Value as V;
        fn table(pairs: Vec<(&str, V)>) -> V {
            V::Table(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
        }
        let int = |n: u64| V::Integer(n as i64);
        let s = |s: &str| V::String(s.to_owned());
        let mut t = toml::Table::new();
        t.insert("listen".into(), s(&self.listen.to_string()));
        t.insert("sources_dir".into(), s(&self.sources_dir));
        t.insert("state_dir".into(), s(&self.state_dir));
        t.insert(
            "max_application_result_bytes".into(),
            int(self.max_application_result_bytes as u64),
        );
        if let Some(i) = &self.instructions {
            t.insert("instructions".into(), s(i));
        }
        t.insert(
            "http".into(),
            table(vec![
                ("endpoint", s(&self.endpoint)),
                ("request_timeout_ms", int(self.request_timeout_ms)),
                (
                    "allowed_origins",
                    V::Array(self.allowed_origins.iter().map(|o| s(o)).collect()),
                ),
            ]),
        );
        t.insert(
            "budget".into(),
            table(vec![
                ("fuel", int(self.budget.fuel)),
                ("max_duration_ms", int(self.budget.max_duration_ms)),
                ("memory_bytes", int(self.budget.memory_bytes)),
            ]),
        );
        t.insert(
            "runtime".into(),
            table(vec![
                ("max_memory_bytes", int(self.max_memory_bytes)),
                (
                    "max_concurrent_calls",
                    int(self.max_concurrent_calls.into()),
                ),
            ]),
        );
        t.insert(
            "list_pagination".into(),
            table(vec![
                ("page_size", int(self.page_size.into())),
                ("max_page_bytes", int(self.max_page_bytes as u64)),
            ]),
        );
        let mode = match self.mode {
            AuthMode::Dev => "dev",
            _ => "none",
        };
        t.insert(
            "auth".into(),
            table(vec![
                ("mode", s(mode)),
                ("subject_claim", s(&self.subject_claim)),
                ("leeway_s", int(self.leeway_s)),
            ]),
        );
        t.insert(
            "resources".into(),
            V::Array(
                self.resources
                    .iter()
                    .map(|(uri, name, body, protected)| {
                        table(vec![
                            ("uri", s(uri)),
                            ("name", s(name)),
                            ("text", s(body)),
                            ("access", s(if *protected { "protected" } else { "public" })),
                        ])
                    })
                    .collect(),
            ),
        );
        t.insert(
            "directories".into(),
            V::Table(
                self.directories
                    .iter()
                    .map(|(k, p)| (k.clone(), table(vec![("path", s(p))])))
                    .collect(),
            ),
        );
        t
    }
}
