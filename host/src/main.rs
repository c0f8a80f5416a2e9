//! The `emseepea` command line: parse arguments, load the config, call into
//! the library.

use clap::{Parser, Subcommand};
use emseepea::config::Config;
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
    /// Serve MCP to one client over stdin/stdout (newline-delimited JSON-RPC).
    /// The caller's bearer token comes from the EMSEEPEA_TOKEN variable.
    Stdio {
        #[arg(long)]
        config: PathBuf,
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

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("EMSEEPEA_LOG").unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new("info,cranelift_codegen=warn,wasmtime=warn")
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Serve { config, listen } => {
                emseepea::server::serve(Config::load(&config)?, listen).await
            }
            Command::Stdio { config } => emseepea::mcp::stdio::serve(Config::load(&config)?).await,
            Command::Check { config } => emseepea::check::run(Config::load(&config)?).await,
            Command::Token {
                config,
                sub,
                scope,
                client_id,
                ttl,
                audience,
            } => {
                let config = Config::load(&config)?;
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
    // A blocking read of stdin (stdio) cannot be cancelled: do not wait for it.
    runtime.shutdown_background();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("emseepea: {e:#}");
            ExitCode::FAILURE
        }
    }
}
