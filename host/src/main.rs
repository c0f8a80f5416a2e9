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
    version,
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
        #[arg(long)]
        config: PathBuf,
        /// Overrides `listen` from the config (port 0: any free port).
        #[arg(long)]
        listen: Option<SocketAddr>,
    },
    /// Load and validate the config and every source; print a table; exit 1 on any problem.
    Check {
        #[arg(long)]
        config: PathBuf,
    },
    /// Mint a dev-mode token (only when the config says `[auth] mode = "dev"`).
    Token {
        #[arg(long)]
        config: PathBuf,
        /// The user id (`sub`). Leave out for a token without a user.
        #[arg(long)]
        sub: Option<String>,
        /// Space-separated scopes.
        #[arg(long, default_value = "")]
        scope: String,
        #[arg(long, default_value = "emseepea-dev-client")]
        client_id: String,
        #[arg(long, default_value_t = 3600)]
        ttl: u64,
        /// The audience; default: the config's resource URL.
        #[arg(long)]
        audience: Option<String>,
    },
}

/// The config, read before logging starts (its `[log] format` decides how
/// lines look); a config that does not load is reported on stderr as before.
fn load(path: &std::path::Path, flag: Option<LogFormat>) -> anyhow::Result<Config> {
    let config = Config::load(path);
    let format = flag.unwrap_or(config.as_ref().map_or(LogFormat::Human, |c| c.log.format));
    emseepea::telemetry::logs::init(format);
    Ok(config?)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let flag = cli.log_format;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Serve { config, listen } => {
                emseepea::server::serve(load(&config, flag)?, listen).await
            }
            Command::Check { config } => emseepea::check::run(load(&config, flag)?).await,
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
                    &config,
                    &emseepea::auth::verifier::dev::TokenRequest {
                        subject: sub.as_deref(),
                        scopes: &scope,
                        client_id: &client_id,
                        ttl_s: ttl,
                        audience: &audience,
                    },
                )?;
                println!("{token}");
                Ok(())
            }
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("emseepea: {e:#}");
            ExitCode::FAILURE
        }
    }
}
