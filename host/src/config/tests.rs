//! Loading the configuration: defaults, each layer's checks as a config
//! file meets them, paths resolved against the file, secrets kept out of `Debug`.

use super::*;

fn parse(text: &str) -> Result<Config, ConfigError> {
    let dir = std::env::temp_dir().join(format!("emseepea-config-{}", rand::random::<u64>()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("c.toml");
    std::fs::write(&file, text).unwrap();
    Config::load(&file)
}

#[test]
fn defaults_follow_the_seed() {
    let c = parse("sources_dir = 's'\nstate_dir = 't'\n").unwrap();
    assert_eq!(c.list_pagination.page_size, 50);
    assert_eq!(c.page_byte_limit(), 1 << 20);
    assert!(c.sources_dir.ends_with("s"));
}

#[test]
fn signatures_required_without_trusted_keys_are_refused() {
    let e = parse("sources_dir = 's'\nstate_dir = 't'\n[sources]\nrequire_signatures = true\n")
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("needs at least one sources.trusted_keys"),
        "{e}"
    );
    let c =
        parse("sources_dir = 's'\nstate_dir = 't'\n[sources]\ntrusted_keys = ['k.pub']\n").unwrap();
    assert!(c.sources.trusted_keys[0].ends_with("/k.pub"));
    assert!(!c.sources.require_signatures);
}

#[test]
fn unknown_keys_are_errors() {
    let e = parse("sources_dir = 's'\nstate_dir = 't'\npage_sise = 3\n").unwrap_err();
    assert!(e.to_string().contains("page_sise"), "{e}");
    let e =
        parse("sources_dir = 's'\nstate_dir = 't'\n[list_pagination]\npagesize = 3\n").unwrap_err();
    assert!(e.to_string().contains("pagesize"), "{e}");
}

#[test]
fn page_size_above_100_is_refused() {
    let e = parse("sources_dir = 's'\nstate_dir = 't'\n[list_pagination]\npage_size = 101\n")
        .unwrap_err();
    assert!(e.to_string().contains("page_size"), "{e}");
}

#[test]
fn tighter_byte_limit_applies() {
    let c = parse(
        "sources_dir = 's'\nstate_dir = 't'\nmax_application_result_bytes = 5000\n[list_pagination]\nmax_page_bytes = 9000\n",
    )
    .unwrap();
    assert_eq!(c.page_byte_limit(), 5000);
}

#[test]
fn fair_shares_default_to_fractions_of_the_pool() {
    let c = parse("sources_dir = 's'\nstate_dir = 't'\n").unwrap();
    assert_eq!(
        (c.runtime.calls_per_caller(), c.runtime.calls_per_source()),
        (32, 48)
    );
    let c =
        parse("sources_dir = 's'\nstate_dir = 't'\n[runtime]\nmax_concurrent_calls = 1\n").unwrap();
    assert_eq!(
        (c.runtime.calls_per_caller(), c.runtime.calls_per_source()),
        (1, 1)
    );
    let e = parse("sources_dir = 's'\nstate_dir = 't'\n[runtime]\nmax_calls_per_caller = 0\n")
        .unwrap_err();
    assert!(e.to_string().contains("max_calls_per_caller"), "{e}");
}

#[test]
fn guest_threads_are_bounded() {
    let with = |n: u32| {
        parse(&format!(
            "sources_dir = 's'\nstate_dir = 't'\n[runtime]\nguest_threads = {n}\n"
        ))
    };
    assert_eq!(with(0).unwrap().runtime.guest_threads, 0);
    assert_eq!(
        with(MAX_GUEST_THREADS).unwrap().runtime.guest_threads,
        MAX_GUEST_THREADS
    );
    let e = with(MAX_GUEST_THREADS + 1).unwrap_err();
    assert!(e.to_string().contains("guest_threads"), "{e}");
}

#[test]
fn peer_prefixes_default_to_64_and_32_and_are_bounded() {
    let with = |v6: u32, v4: u32| {
        parse(&format!(
            "sources_dir = 's'\nstate_dir = 't'\n[http]\npeer_ipv6_prefix = {v6}\npeer_ipv4_prefix = {v4}\n"
        ))
    };
    let c = parse("sources_dir = 's'\nstate_dir = 't'\n").unwrap();
    assert_eq!((c.http.peer_ipv6_prefix, c.http.peer_ipv4_prefix), (64, 32));
    let c = with(56, 24).unwrap();
    assert_eq!((c.http.peer_ipv6_prefix, c.http.peer_ipv4_prefix), (56, 24));
    for (v6, v4) in [(129, 32), (64, 33)] {
        let e = with(v6, v4).unwrap_err();
        assert!(e.to_string().contains("peer_ipv"), "{e}");
    }
}

#[test]
fn a_workers_turn_is_bounded() {
    use crate::workers::{DEFAULT_YIELD_AFTER_US, MAX_YIELD_AFTER_US};
    let with = |n: u32| {
        parse(&format!(
            "sources_dir = 's'\nstate_dir = 't'\n[workers]\nyield_after_us = {n}\n"
        ))
    };
    let c = parse("sources_dir = 's'\nstate_dir = 't'\n").unwrap();
    assert_eq!(c.workers.yield_after_us, DEFAULT_YIELD_AFTER_US);
    assert_eq!(with(0).unwrap().workers.yield_after_us, 0);
    assert_eq!(
        with(MAX_YIELD_AFTER_US).unwrap().workers.yield_after_us,
        MAX_YIELD_AFTER_US
    );
    let e = with(MAX_YIELD_AFTER_US + 1).unwrap_err();
    assert!(e.to_string().contains("yield_after_us"), "{e}");
}

#[test]
fn guest_threads_are_off_by_default() {
    let c = parse("sources_dir = 's'\nstate_dir = 't'\n").unwrap();
    assert_eq!(c.runtime.guest_threads, 0);
    assert_eq!(
        c.runtime.guest_threads_from_connections,
        DEFAULT_GUEST_THREADS_FROM_CONNECTIONS
    );
    assert_eq!(c.runtime.standby_instances, DEFAULT_STANDBY_INSTANCES);
}

/// The claim mappings: defaults as before, and no empty claim name or
/// audience (an empty `scope_claims` would leave every caller scopeless).
#[test]
fn claim_mappings_are_checked() {
    let with = |auth: &str| {
        parse(&format!(
            "sources_dir = 's'\nstate_dir = 't'\n[auth]\nmode = 'dev'\n{auth}"
        ))
    };
    let c = with("").unwrap();
    assert_eq!(c.auth.scope_claims, ["scope", "scp"]);
    assert!(c.auth.accepted_audiences.is_empty());
    let c = with("scope_claims = ['roles']\naccepted_audiences = ['api://x']").unwrap();
    assert_eq!(c.auth.scope_claims, ["roles"]);
    assert_eq!(c.auth.accepted_audiences, ["api://x"]);
    for (bad, reason) in [
        ("scope_claims = []", "scope_claims must name"),
        ("scope_claims = ['scp', '']", "scope_claims must name"),
        ("accepted_audiences = ['']", "accepted_audiences must not"),
    ] {
        let e = with(bad).unwrap_err();
        assert!(e.to_string().contains(reason), "{bad}: {e}");
    }
}

/// Each mode reads its own table: a mode without it, or a table the mode
/// would silently ignore (an operator who set `[auth.jwt]` but left
/// `mode = "dev"`), stops startup with the reason.
#[test]
fn each_auth_mode_reads_its_own_table_only() {
    const BASE: &str = "sources_dir = 's'\nstate_dir = 't'\n";
    const JWT: &str = "[auth.jwt]\nissuer = 'i'\njwks_file = 'k.json'\n";
    const INTROSPECTION: &str =
        "[auth.introspection]\nendpoint = 'https://as/i'\nclient_id = 'c'\nclient_secret = 's'\n";
    let with = |mode: &str, tables: &str| {
        parse(&format!(
            "{BASE}[auth]\nmode = '{mode}'\nauthorization_servers = ['https://as']\n{tables}"
        ))
    };
    let refused = [
        ("jwt", "", "auth.mode = \"jwt\" needs [auth.jwt]"),
        ("introspection", "", "needs [auth.introspection]"),
        (
            "dev",
            JWT,
            "[auth.jwt] is set but auth.mode = \"dev\" does not read it",
        ),
        ("none", JWT, "[auth.jwt] is set"),
        ("dev", INTROSPECTION, "[auth.introspection] is set"),
        ("jwt", INTROSPECTION, "needs [auth.jwt]"),
        ("introspection", JWT, "needs [auth.introspection]"),
    ];
    for (mode, tables, reason) in refused {
        let e = with(mode, tables).unwrap_err();
        assert!(e.to_string().contains(reason), "{mode} {tables:?}: {e}");
    }
    let both = format!("{JWT}{INTROSPECTION}");
    let e = with("jwt", &both).unwrap_err();
    assert!(e.to_string().contains("[auth.introspection] is set"), "{e}");
    let e = with("introspection", &both).unwrap_err();
    assert!(e.to_string().contains("[auth.jwt] is set"), "{e}");
    let e = with("jwt", "[auth.jwt]\nissuer = 'i'\n").unwrap_err();
    assert!(
        e.to_string()
            .contains("exactly one of jwks_file or jwks_url"),
        "{e}"
    );
    let e = with(
        "jwt",
        "[auth.jwt]\nissuer = 'i'\njwks_file = 'k.json'\njwks_url = 'https://as/k'\n",
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("exactly one of jwks_file or jwks_url"),
        "{e}"
    );
    let e = with(
        "introspection",
        &format!("{INTROSPECTION}max_concurrent = 0\n"),
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("max_concurrent must be positive"),
        "{e}"
    );

    assert!(matches!(
        with("dev", "").unwrap().auth.method,
        AuthMethod::Dev
    ));
    assert!(matches!(parse(BASE).unwrap().auth.method, AuthMethod::None));
    let c = with("jwt", JWT).unwrap();
    let AuthMethod::Jwt(JwtConfig {
        jwks: JwksSource::File(file),
        ..
    }) = &c.auth.method
    else {
        panic!("{:?}", c.auth.method)
    };
    // Relative to the config file, like every other path in it.
    assert_eq!(file, &c.file.parent().unwrap().join("k.json"));
    let c = with("introspection", INTROSPECTION).unwrap();
    assert!(matches!(&c.auth.method, AuthMethod::Introspection(i) if i.client_id == "c"));
}

#[test]
fn a_static_resource_has_exactly_one_body() {
    let with = |body: &str| {
        parse(&format!(
            "sources_dir = 's'\nstate_dir = 't'\n[[resources]]\nuri = 'test://a'\nname = 'a'\n{body}"
        ))
    };
    for body in [
        "",
        "text = 'x'\nblob = 'eA=='\n",
        "text = 'x'\nfile = 'f.txt'\n",
    ] {
        let e = with(body).unwrap_err();
        assert!(
            e.to_string()
                .contains("resource test://a: exactly one of text, blob or file is required"),
            "{body:?}: {e}"
        );
    }
    let c = with("file = 'f.txt'\n").unwrap();
    assert_eq!(
        c.resources[0].body,
        StaticBody::File(c.file.parent().unwrap().join("f.txt"))
    );
    assert_eq!(
        with("blob = 'eA=='\n").unwrap().resources[0].body,
        StaticBody::Blob("eA==".into())
    );
}

#[test]
fn credentials_settings_are_checked() {
    let jwt = |extra: &str| {
        parse(&format!(
            "sources_dir = 's'\nstate_dir = 't'\n[auth]\nmode = 'jwt'\n{extra}\n[auth.jwt]\nissuer = 'i'\njwks_file = 'k.json'\n"
        ))
    };
    let e = jwt("").unwrap_err();
    assert!(e.to_string().contains("authorization_servers"), "{e}");
    jwt("authorization_servers = ['https://as']").unwrap();
    let e = parse(
        "sources_dir = 's'\nstate_dir = 't'\n[auth]\nmode = 'jwt'\nauthorization_servers = ['https://as']\n[auth.jwt]\nissuer = 'i'\njwks_file = 'k.json'\njwks_refresh_interval_s = 0\n",
    )
    .unwrap_err();
    assert!(e.to_string().contains("jwks_refresh_interval_s"), "{e}");
    let c = parse(
        "sources_dir = 's'\nstate_dir = 't'\n[auth]\nmode = 'jwt'\nauthorization_servers = ['https://as']\n[auth.jwt]\nissuer = 'i'\njwks_file = 'k.json'\njwks_refresh_interval_s = 1\n",
    )
    .unwrap();
    let AuthMethod::Jwt(jwt) = c.auth.method else {
        panic!("mode jwt reads [auth.jwt]")
    };
    assert_eq!(jwt.jwks_refresh_interval_s, 1);
    let e =
        parse("sources_dir = 's'\nstate_dir = 't'\ncache_dir = 'c'\ncache_key_file = 'c/key'\n")
            .unwrap_err();
    assert!(e.to_string().contains("cache_key_file"), "{e}");
    let c = parse("sources_dir = 's'\nstate_dir = 't'\n").unwrap();
    assert!(c.cache_key_file().ends_with("t/precompile-key"));
    assert_eq!(c.auth.cache_max_age_s, DEFAULT_TOKEN_CACHE_MAX_AGE_S);
}

/// Issue 48: the config types derived `Debug` with the secrets in them.
#[test]
fn secrets_never_show_in_debug() {
    let c = parse(
        "sources_dir = 's'\nstate_dir = 't'\n[auth]\nmode = 'introspection'\n\
         authorization_servers = ['https://as']\n[auth.introspection]\nendpoint = 'https://as/i'\n\
         client_id = 'c'\nclient_secret = 'hunter2-client'\n[databases.pg]\nengine = 'postgres'\n\
         url = 'postgres://u:hunter2-url@h/d'\n[databases.pg2]\nengine = 'postgres'\nhost = 'h'\n\
         password = 'hunter2-password'\n",
    )
    .unwrap();
    let shown = format!("{c:?}");
    assert!(!shown.contains("hunter2"), "{shown}");
    assert_eq!(shown.matches("[redacted]").count(), 3, "{shown}");
    let AuthMethod::Introspection(i) = &c.auth.method else {
        panic!("mode introspection")
    };
    assert_eq!(i.client_secret.as_ref().unwrap().expose(), "hunter2-client");
}
