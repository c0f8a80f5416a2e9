//! The `emseepea` command line: parse arguments, load the config, call into
//! the library.

use clap::{Parser, Subcommand};
use emseepea::config::{Config, LogFormat};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "emseepea",
    version = emseepea::VERSION,
    about = "An MCP server hosting sandboxed WebAssembly components as resource sources"
)]
struct Cli {
    /// Log format on stderr (overrides the config's `[log] format`).
    #[arg(long, global = true, value_enum)]
    log_format: Option<LogFormat>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Load the config and every source, then serve MCP over HTTP.
    Serve {
        /// The server's config file (emseepea.toml; `emseepea config defaults` prints one).
        #[arg(long)]
        config: PathBuf,
        /// Overrides `listen` from the config (port 0: any free port).
        #[arg(long)]
        listen: Option<SocketAddr>,
    },
    /// Serve MCP to one client over stdin/stdout (newline-delimited JSON-RPC).
    /// The caller's bearer token comes from the EMSEEPEA_TOKEN variable.
    Stdio {
        /// The server's config file (emseepea.toml; `emseepea config defaults` prints one).
        #[arg(long)]
        config: PathBuf,
    },
    /// Load and validate the config and every source; print a table; exit 1 on any problem.
    Check {
        /// The server's config file (emseepea.toml; `emseepea config defaults` prints one).
        #[arg(long)]
        config: PathBuf,
    },
    /// Mint a dev-mode token (only when the config says `[auth] mode = "dev"`).
    Token {
        /// The server's config file (emseepea.toml; `emseepea config defaults` prints one).
        #[arg(long)]
        config: PathBuf,
        /// The user id (`sub`). Leave out for a token without a user.
        #[arg(long)]
        sub: Option<String>,
        /// Space-separated scopes.
        #[arg(long, default_value = "")]
        scope: String,
        /// The client id (`client_id` claim) the token names.
        #[arg(long, default_value = "emseepea-dev-client")]
        client_id: String,
        /// Lifetime in seconds.
        #[arg(long, default_value_t = 3600)]
        ttl: u64,
        /// The audience; default: the config's resource URL.
        #[arg(long)]
        audience: Option<String>,
    },
    /// Scaffold a guest project: a small per-user dataset on the SDK, a
    /// manifest, and one build command (printed, and in its README).
    New {
        /// The guest's name: lowercase letters, digits and `-`, starting
        /// with a letter (the package, template, URI scheme and scope prefix).
        name: String,
        /// The guest's language (its SDK and build tools).
        #[arg(long, value_enum)]
        lang: emseepea::devkit::new::Lang,
        /// Where (default: ./NAME); must not exist or be empty.
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Drive one guest through the host's runtime and validation as test
    /// principals; print every contract break; exit 1 on any.
    TestSource {
        /// The component.
        file: PathBuf,
        /// Its manifest (default: FILE.toml beside it, if present).
        #[arg(long)]
        manifest: Option<PathBuf>,
        /// A server config for databases, directories and budgets.
        #[arg(long)]
        config: Option<PathBuf>,
        /// A test caller, replacing the defaults (two users, a token
        /// without a user, a user without scopes): SUBJECT (with the
        /// template's required scopes), SUBJECT:SCOPES (comma-separated,
        /// may be empty), `-` as SUBJECT for no user. Repeatable.
        #[arg(long = "principal")]
        principals: Vec<emseepea::devkit::principals::PrincipalSpec>,
        /// `per-user` (each user owns records: ownership is checked) or
        /// `shared` (every caller sees the same records, e.g. a catalog).
        #[arg(long, default_value = "per-user")]
        records: emseepea::devkit::test_source::Records,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Sign a source and its manifest: writes NAME.sig beside NAME.wasm with
    /// `ssh-keygen -Y sign -n emseepea-source -f KEY` (docs: Distributing sources).
    Sign {
        /// The component (its manifest is NAME.toml beside it, if present).
        file: PathBuf,
        /// The private key (or, with ssh-agent, its public key file).
        #[arg(long)]
        key: PathBuf,
    },
    /// Publish a source (NAME.wasm, with NAME.toml and NAME.sig when present)
    /// to an OCI registry as REFERENCE; prints the digest it is pinned by.
    Push {
        /// The component, NAME.wasm (NAME.toml and NAME.sig beside it go with it).
        file: PathBuf,
        /// registry/repository:tag
        reference: String,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Fetch a source from an OCI registry into a sources directory,
    /// checking its digest and, with trusted keys, its signature.
    Pull {
        /// registry/repository:tag or registry/repository@sha256:DIGEST;
        /// leave out to pull every source of --lock by its digest.
        reference: Option<String>,
        /// The sources directory to write NAME.wasm (+ .toml, .sig) into.
        #[arg(long)]
        into: PathBuf,
        /// The file stem (default: the repository's last path segment).
        #[arg(long)]
        name: Option<String>,
        /// The lockfile: with a reference, record NAME -> digest in it;
        /// without, pull what it pins.
        #[arg(long)]
        lock: Option<PathBuf>,
        /// A server config whose `[sources] trusted_keys` must have signed the source.
        #[arg(long)]
        config: Option<PathBuf>,
        /// A trusted public key (inline or a file); repeatable.
        #[arg(long = "trusted-key")]
        trusted_keys: Vec<String>,
        #[command(flatten)]
        registry: RegistryArgs,
    },
    /// Print the configuration's reference, generated from the code.
    Config {
        #[command(subcommand)]
        what: ConfigCommand,
    },
    /// Internal: compile one component (wasm on stdin, artifact on stdout)
    /// for a server of this binary; see `runtime::compile`.
    #[command(name = emseepea::runtime::compile::CHILD_SUBCOMMAND, hide = true)]
    CompileComponent { runtime_config: String },
}

/// How `push` and `pull` reach the registry.
#[derive(clap::Args)]
struct RegistryArgs {
    /// Plain HTTP (a registry on localhost), not HTTPS.
    #[arg(long)]
    plain_http: bool,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = emseepea::distribution::oci::DEFAULT_TIMEOUT.as_secs())]
    timeout_s: u64,
}

impl RegistryArgs {
    fn registry(&self) -> emseepea::distribution::oci::Registry {
        emseepea::distribution::oci::Registry {
            plain_http: self.plain_http,
            timeout: std::time::Duration::from_secs(self.timeout_s),
        }
    }
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// The JSON Schema of emseepea.toml (keys, types, defaults, bounds,
    /// meanings), for editors (taplo, Even Better TOML) and tools.
    Schema {
        /// The schema of a source's manifest (NAME.toml) instead.
        #[arg(long)]
        manifest: bool,
    },
    /// A complete emseepea.toml: every key at its default, with its meaning.
    Defaults,
    /// The book's configuration reference page (Markdown).
    Reference,
}

/// The config, read before logging starts (its `[log] format` decides how
/// lines look); a config that does not load is reported on stderr as before.
fn load(path: &std::path::Path, flag: Option<LogFormat>) -> anyhow::Result<Config> {
    let config = Config::load(path);
    let format = flag.unwrap_or(config.as_ref().map_or(LogFormat::Human, |c| c.log.format));
    emseepea::telemetry::logs::init(format);
    Ok(config?)
}

/// `load`, for the commands that serve: traces too, when configured.
fn load_serving(path: &std::path::Path, flag: Option<LogFormat>) -> anyhow::Result<Config> {
    let config = Config::load(path);
    let format = flag.unwrap_or(config.as_ref().map_or(LogFormat::Human, |c| c.log.format));
    match &config {
        Ok(c) => emseepea::telemetry::logs::init_with_traces(format, &c.traces)?,
        Err(_) => emseepea::telemetry::logs::init(format),
    }
    Ok(config?)
}

/// The outcome of a command: success, a finding (exit 1, already printed) or an error.
enum Outcome {
    Ok,
    Findings,
}

fn main() -> ExitCode {
    emseepea::no_transparent_huge_pages();
    let cli = Cli::parse();
    if let Command::CompileComponent { runtime_config } = &cli.command {
        return emseepea::runtime::compile::child_main(runtime_config);
    }
    // Compiling's memory stays with a child process, not with the server.
    if let Ok(exe) = std::env::current_exe() {
        emseepea::runtime::compile::compile_in_child_processes(exe);
    }
    if let Command::Config { what } = &cli.command {
        use emseepea::config::reference;
        print!(
            "{}",
            match what {
                ConfigCommand::Schema { manifest: false } =>
                    reference::to_file(&reference::schema()),
                ConfigCommand::Schema { manifest: true } =>
                    reference::to_file(&reference::manifest_schema()),
                ConfigCommand::Defaults => reference::defaults_toml(),
                ConfigCommand::Reference => reference::markdown(),
            }
        );
        return ExitCode::SUCCESS;
    }
    let flag = cli.log_format;
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder
        .enable_all()
        // Where the workers run and when they yield: see `workers` (the plan
        // and the policy are made by `serve`).
        .on_thread_park(emseepea::workers::on_worker_park)
        .on_thread_unpark(emseepea::workers::on_worker_unpark)
        .on_thread_start(emseepea::workers::on_thread_start);
    let runtime = builder.build().expect("tokio runtime");
    let result: anyhow::Result<Outcome> = runtime.block_on(async move {
        match cli.command {
            Command::Serve { config, listen } => {
                emseepea::server::serve(load_serving(&config, flag)?, listen).await?;
                Ok(Outcome::Ok)
            }
            Command::Check { config } => {
                emseepea::check::run(load(&config, flag)?).await?;
                Ok(Outcome::Ok)
            }
            Command::New { name, lang, dir } => {
                let created = emseepea::devkit::new::create(&name, lang, dir.as_deref())?;
                print!("{}", created.summary());
                Ok(Outcome::Ok)
            }
            Command::TestSource {
                file,
                manifest,
                config,
                principals,
                records,
                json,
            } => {
                emseepea::telemetry::logs::init(flag.unwrap_or(LogFormat::Human));
                let report =
                    emseepea::devkit::test_source::run(emseepea::devkit::test_source::Options {
                        wasm: file,
                        manifest,
                        config,
                        principals,
                        records,
                    })
                    .await?;
                if json {
                    println!("{}", report.to_json());
                } else {
                    print!("{}", report.to_table());
                }
                Ok(if report.ok() {
                    Outcome::Ok
                } else {
                    Outcome::Findings
                })
            }
            Command::Stdio { config } => {
                emseepea::server::stdio(load_serving(&config, flag)?).await?;
                Ok(Outcome::Ok)
            }
            Command::Token {
                config,
                sub,
                scope,
                client_id,
                ttl,
                audience,
            } => {
                let config = load(&config, flag)?;
                let audience = audience
                    .unwrap_or_else(|| emseepea::server::resource_url(&config, config.listen));
                let token = emseepea::auth::verifier::dev::mint(
                    &config.auth,
                    &config.file,
                    &config.state_dir,
                    &emseepea::auth::verifier::dev::TokenRequest {
                        subject: sub.as_deref(),
                        scopes: &scope,
                        client_id: &client_id,
                        ttl_s: ttl,
                        audience: &audience,
                    },
                )?;
                println!("{token}");
                Ok(Outcome::Ok)
            }
            Command::Sign { file, key } => {
                let sig = emseepea::distribution::signature::sign(&file, &key)?;
                println!("signed {} -> {}", file.display(), sig.display());
                Ok(Outcome::Ok)
            }
            Command::Push {
                file,
                reference,
                registry,
            } => {
                let digest =
                    emseepea::distribution::oci::push(&registry.registry(), &file, &reference)
                        .await?;
                println!("pushed {reference} {digest}");
                Ok(Outcome::Ok)
            }
            Command::Pull {
                reference,
                into,
                name,
                lock,
                config,
                trusted_keys,
                registry,
            } => {
                emseepea::telemetry::logs::init(flag.unwrap_or(LogFormat::Human));
                let config = config.map(|c| Config::load(&c)).transpose()?;
                let pulled =
                    emseepea::distribution::pull_command(emseepea::distribution::PullCommand {
                        reference,
                        into,
                        name,
                        lock,
                        sources: config.map(|c| c.sources),
                        trusted_keys,
                        registry: registry.registry(),
                    })
                    .await?;
                for p in pulled {
                    println!(
                        "pulled {} {} -> {} ({})",
                        p.name,
                        p.pinned,
                        p.component.display(),
                        p.verdict
                    );
                }
                Ok(Outcome::Ok)
            }
            Command::CompileComponent { .. } | Command::Config { .. } => {
                unreachable!("dispatched before the runtime")
            }
        }
    });
    // Spans still buffered go out now, while the runtime the exporter sends
    // on still runs (the drain has ended every request).
    emseepea::telemetry::traces::shutdown();
    // A blocking read of stdin (stdio) cannot be cancelled: do not wait for it.
    runtime.shutdown_background();
    match result {
        Ok(Outcome::Ok) => ExitCode::SUCCESS,
        Ok(Outcome::Findings) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("emseepea: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// `emseepea COMMAND --help` explains every flag and argument.
    #[test]
    fn every_flag_has_a_help_line() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in cmd.get_arguments() {
                let builtin = matches!(arg.get_id().as_str(), "help" | "version");
                if !builtin && !arg.is_hide_set() && arg.get_help().is_none() {
                    missing.push(format!("{path} {}", arg.get_id()));
                }
            }
            for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&Cli::command(), "emseepea", &mut missing);
        assert!(missing.is_empty(), "no help line: {missing:?}");
    }
}
